package market

import (
	"strings"
	"testing"
)

// One offer with a drifted type must not fail the search: a number where a
// string belongs is read as its text, a numeric string where a number
// belongs as the number, and anything else leaves the field unknown (its
// zero value), noted. An offer whose id or price cannot be read is dropped
// (it could not be ranked or rented honestly), noted too.
func TestSearchAnswerReadsDriftedFieldsLeniently(t *testing.T) {
	t.Parallel()
	answer := `{"offers":[
	 {"id":1,"dph_total":0.40,"gpu_name":"RTX 4090","os_version":22.04,"num_gpus":1},
	 {"id":2,"dph_total":"0.45","gpu_name":"RTX 4090","num_gpus":"2","rentable":"true","reliability2":"0.99"},
	 {"id":3,"dph_total":"garbage","gpu_name":"RTX 4090"},
	 {"id":4,"dph_total":0.5,"gpu_name":{"odd":true},"cpu_ram":[1,2],"verified":"yes","inet_up":"fast"},
	 {"id":"five","dph_total":0.6},
	 {"id":6,"dph_total":0.7,"gpu_name":"A100"}]}`
	offers, ok, notes, err := DecodeSearchAnswerNotes([]byte(answer))
	if err != nil || !ok {
		t.Fatalf("one odd offer failed the search: ok %v, %v", ok, err)
	}
	byID := map[int64]Offer{}
	for _, o := range offers {
		byID[o.ID] = o
	}
	if len(offers) != 4 {
		t.Fatalf("got %d offers %v, want 1, 2, 4 and 6", len(offers), byID)
	}
	if o := byID[1]; o.OSVersion != "22.04" || o.DPHTotal != 0.40 {
		t.Errorf("offer 1: os_version %q dph %v", o.OSVersion, o.DPHTotal)
	}
	if o := byID[2]; o.DPHTotal != 0.45 || o.NumGPUs != 2 || !o.Rentable || o.Reliability2 != 0.99 {
		t.Errorf("offer 2 (numbers as strings): %+v", o)
	}
	if o := byID[4]; o.GPUName != "" || o.CPURAM != 0 || o.InetUp != 0 || o.DPHTotal != 0.5 {
		t.Errorf("offer 4: unreadable fields not left unknown: %+v", o)
	}
	if byID[6].GPUName != "A100" {
		t.Errorf("offer after the odd ones: %+v", byID[6])
	}
	if notes.Dropped != 2 || notes.Odd < 3 {
		t.Errorf("notes %+v, want 2 dropped and at least 3 odd offers", notes)
	}
	if s := notes.String(); !strings.Contains(s, "dph_total") || !strings.Contains(s, "gpu_name") {
		t.Errorf("notes do not name the fields: %s", s)
	}
	// Malformed JSON is still an error: leniency is about types only.
	if _, _, _, err := DecodeSearchAnswerNotes([]byte(`{"offers":[{"id":1,"dph_total":x}]}`)); err == nil {
		t.Error("malformed JSON accepted")
	}
}
