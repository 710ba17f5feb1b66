package market

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// stdDecode is the reference: encoding/json into the same type.
func stdDecode(t *testing.T, data []byte) []Offer {
	t.Helper()
	var out []Offer
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// filledOffers sets every field of Offer to a distinct random value, so a
// field the scanner forgets shows as a difference.
func filledOffers(n int) []Offer {
	r := rand.New(rand.NewPCG(3, 4))
	out := make([]Offer, n)
	for i := range out {
		v := reflect.ValueOf(&out[i]).Elem()
		for f := range v.NumField() {
			fv := v.Field(f)
			switch fv.Kind() {
			case reflect.Int, reflect.Int64:
				fv.SetInt(r.Int64N(1 << 40))
			case reflect.Float64:
				// Every shape the API sends: integers, short decimals, long
				// fractions, tiny and huge exponents.
				x := []float64{float64(r.IntN(5000)), float64(r.IntN(1e6)) / 1e4, r.Float64() * 1e3, r.Float64() * 1e-9, r.Float64() * 1e300, -r.Float64()}[r.IntN(6)]
				fv.SetFloat(x)
			case reflect.String:
				fv.SetString([]string{"RTX 4090", "Texas, US", `quote " and \ back`, "ünï", ""}[r.IntN(5)])
			case reflect.Bool:
				fv.SetBool(r.IntN(2) == 1)
			}
		}
	}
	return out
}

func TestDecodeOffersAgreesWithEncodingJSON(t *testing.T) {
	offers := filledOffers(300)
	arr, err := json.Marshal(offers)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeOffers(arr)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(stdDecode(t, arr), got); d != "" {
		t.Fatalf("array: scanner differs from encoding/json (-std +scanner):\n%s", d)
	}

	// The search answer, with keys the scanner must skip around it and
	// unknown fields of every JSON type inside offers.
	var rows []string
	for _, o := range offers[:20] {
		b, _ := json.Marshal(o)
		rows = append(rows, `{"unknown_obj":{"a":[1,{"b":"}"}]},"unknown_null":null,"unknown_arr":[[],{}],`+string(b[1:]))
	}
	wrapped := `{"timing": 1.5, "offers": [` + strings.Join(rows, ",") + `], "next": null}`
	got, err = DecodeOffers([]byte(wrapped))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(offers[:20], got); d != "" {
		t.Fatalf("wrapped: (-want +got):\n%s", d)
	}

	// JSON lines.
	got, err = DecodeOffers([]byte(strings.Join(rows, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(offers[:20], got); d != "" {
		t.Fatalf("json lines: (-want +got):\n%s", d)
	}

	// A saved ranking: Ranked rows, whose "score" is vastfleet's.
	ranked := RankTop(offers[:50], mustScorer(t, "vcpu"), 0)
	saved, _ := json.Marshal(ranked)
	got, err = DecodeOffers(saved)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 50 || got[0].ID != ranked[0].ID || got[49].ID != ranked[49].ID {
		t.Fatalf("saved ranking: got %d offers", len(got))
	}
}

func TestDecodeOffersNamesTheLineOfAnError(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"[\n{\"id\": 1},\n{\"id\": x}\n]", "line 3"},
		{"[{\"id\": 1}", "line 1"},
		{"{\"id\": 1}\n{\"gpu_name\": \"unterminated}\n", "unterminated string"},
		{"42", "want an offer object"},
		{"[{\"id\": 1} {\"id\": 2}]", "want , or ]"},
	} {
		_, err := DecodeOffers([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecodeOffers(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
	if got, err := DecodeOffers([]byte(" [] \n")); err != nil || len(got) != 0 {
		t.Errorf("empty array: %v %v", got, err)
	}
}

func FuzzDecodeOffers(f *testing.F) {
	f.Add([]byte(`[{"id":1,"dph_total":0.5,"gpu_name":"RTX 4090"}]`))
	f.Add([]byte(`{"offers":[{"id":2,"rentable":true}]}`))
	f.Add([]byte("{\"id\":3}\n{\"id\":4.5e3}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeOffers(data)
		if err != nil {
			return
		}
		// Whatever the scanner accepts as an array, encoding/json reads
		// the same way, except where encoding/json is lenient beyond the
		// API: keys matched case-insensitively or through escapes, and
		// invalid UTF-8 replaced.
		if !bytes.Equal(bytes.ToLower(data), data) || bytes.IndexByte(data, '\\') >= 0 || !utf8.Valid(data) {
			return
		}
		var std []Offer
		if json.Unmarshal(data, &std) == nil && len(std) > 0 {
			if d := cmp.Diff(std, got); d != "" {
				t.Fatalf("%s: (-std +scanner):\n%s", fmt.Sprintf("%.200q", data), d)
			}
		}
	})
}

func mustScorer(t *testing.T, by string) Scorer {
	t.Helper()
	s, err := ScoreBy(by)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRankScanEqualsRankTop(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: statistics over many rentals, not concurrency; the plain run covers it")
	}
	offers := syntheticOffers(5000)
	data, err := json.Marshal(offers)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := DecodeOffers(data)
	if err != nil {
		t.Fatal(err)
	}
	keep := func(o *Offer) bool { return o.Rentable && o.CPUCoresEffective > 16 }
	var kept []Offer
	for _, o := range decoded {
		if keep(&o) {
			kept = append(kept, o)
		}
	}
	for _, by := range []string{"vcpu", "gpu", "dlperf"} {
		s := mustScorer(t, by)
		for _, k := range []int{0, 1, 20, 100, len(kept), len(kept) + 5} {
			got, err := RankScan(context.Background(), data, keep, s, k)
			if err != nil {
				t.Fatal(err)
			}
			want := RankTop(kept, s, k)
			if k == 0 && len(want) != len(kept) {
				t.Fatalf("RankTop(k=0) returned %d of %d", len(want), len(kept))
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("by %s k=%d: (-RankTop +RankScan):\n%s", by, k, d)
			}
		}
	}
	// And RankTop's prefix is Rank's.
	s := mustScorer(t, "vcpu")
	if d := cmp.Diff(Rank(kept, s)[:50], RankTop(kept, s, 50)); d != "" {
		t.Fatalf("RankTop(50) is not Rank's first 50:\n%s", d)
	}
}

// The parallel ranking (large markets) orders exactly as one plain stable
// sort of every offer does.
func TestParallelRankingEqualsAPlainSort(t *testing.T) {
	offers := syntheticOffers(3 * parallelRankMin)
	for i := range offers {
		if i%7 == 0 {
			offers[i].DPHTotal = 0 // unpriced offers rank last
		}
		if i%11 == 0 {
			offers[i] = offers[i/2] // ties on every key but position
		}
	}
	keep := func(o *Offer) bool { return o.InetDown > 50 }
	s := mustScorer(t, "vcpu")
	var want []int32
	keys := map[int32]rankKey{}
	for i := range offers {
		if keep(&offers[i]) {
			want = append(want, int32(i))
			keys[int32(i)] = newRankKey(&offers[i], s)
		}
	}
	slices.SortStableFunc(want, func(a, b int32) int { ka, kb := keys[a], keys[b]; return ka.compare(&kb) })
	for _, k := range []int{0, 10, 1000} {
		got := RankIndices(offers, keep, s, k)
		w := want
		if k > 0 {
			w = want[:k]
		}
		if !slices.Equal(got, w) {
			t.Fatalf("k=%d: parallel ranking differs from a plain sort (first: got %v want %v)", k, got[:5], w[:5])
		}
	}
}
