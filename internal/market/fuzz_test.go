package market

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse checks that Parse never panics, fails only with *ParseError, and
// that what it builds survives MarshalJSON → UnmarshalJSON and compiles
// without panicking.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		mustShowQuery,
		"gpu_ram>=24 num_gpus=2 geolocation!=CN",
		"geolocation notin [US, ,CA ] gpu_name in [RTX_4090,\"A100 SXM4\"]",
		"driver_version in [535.86.05,550] driver_version>=535.86.05",
		"verified=any verified=True rentable=None limit=5 order=x",
		"gpu_ram in [16,24] duration>=2 cpu_ram!=1 cpu_ram!=2",
		"dph_total<0.5 & num_gpus=1",
		"num_gpus not in 1,2 num_gpus not eq 3 a noteq b",
	} {
		f.Add(s, false, 0)
		f.Add(s, true, 100)
	}
	f.Fuzz(func(t *testing.T, s string, noDefault bool, limit int) {
		q, _, err := Parse(s, ParseOptions{NoDefault: noDefault, Limit: limit, Order: "+dph_total,id-"})
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error %v is not a *ParseError", s, err)
			}
			return
		}
		b, err := json.Marshal(q)
		if err != nil {
			t.Fatalf("Marshal(Parse(%q)): %v", s, err)
		}
		var back Query
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if d := cmp.Diff(q, back); d != "" {
			t.Fatalf("round trip of %q via %s (-want +got):\n%s", s, b, d)
		}
		if fl, err := Compile(q); err == nil {
			o := sampleOffer()
			fl.Match(&o)
		}
	})
}
