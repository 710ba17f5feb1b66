package jsonarray

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
)

// jsonOdd is a row with the shapes a ranked offer lacks: nesting, empty
// and null containers, maps, raw messages, pointers.
type jsonOdd struct {
	Name   string            `json:"name"`
	Tags   []string          `json:"tags"`
	Empty  []int             `json:"empty"`
	Nil    []int             `json:"nil"`
	M      map[string]any    `json:"m"`
	EmptyM map[string]string `json:"empty_m"`
	Raw    json.RawMessage   `json:"raw"`
	Ptr    *float64          `json:"ptr"`
	Nested [][]any           `json:"nested"`
	Offer  *market.Offer     `json:"offer,omitempty"`
}

// TestWriteEqualsMarshalIndent: the hand-indented stream is byte
// for byte what an indenting json.Encoder over the whole slice gives,
// for ranked offers with awkward strings and numbers and for rows of
// other shapes.
func TestWriteEqualsMarshalIndent(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 12))
	strs := []string{"", `a"b`, `back\slash`, "tab\there", "new\nline", "<b>&amp;</b>", "\u2028\u2029", "émoji 🚀",
		"ctl\x01\x1f", "bad utf8 \xff\xfe", `{"not":"json"}`, "[1,2]", "colon: comma, brace}", `\"`, `"`, `\`}
	pick := func() string { return strs[r.IntN(len(strs))] }
	nums := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e21, 1e-7, 123456789.123, math.MaxFloat64, math.SmallestNonzeroFloat64, 3.0e20, -2.5e-9}
	num := func() float64 {
		if r.IntN(3) == 0 {
			return nums[r.IntN(len(nums))]
		}
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(30)-15))
	}
	ranked := make([]market.Ranked, 300)
	for i := range ranked {
		o := market.Offer{ID: r.Int64(), MachineID: -r.Int64N(100), NumGPUs: r.IntN(9), GPUName: pick(), GPURAM: num(),
			CPUCoresEffective: num(), DPHTotal: num(), Geolocation: pick(), Verification: pick(), Rentable: r.IntN(2) == 0,
			DriverVersion: pick(), PublicIPAddr: pick(), ClusterID: int64(r.IntN(2)), Reliability: num()}
		ranked[i] = market.Ranked{Offer: o, Score: num()}
	}
	check := func(name string, rows any, got func(*bytes.Buffer) error) {
		t.Helper()
		var want, have bytes.Buffer
		enc := json.NewEncoder(&want) // what the CLI's writeJSON writes
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			t.Fatal(err)
		}
		if err := got(&have); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have.Bytes(), want.Bytes()) {
			w, h := want.String(), have.String()
			i := 0
			for i < len(w) && i < len(h) && w[i] == h[i] {
				i++
			}
			t.Fatalf("%s: differs at byte %d:\nwant …%q…\ngot  …%q…", name, i, w[max(0, i-60):min(len(w), i+60)], h[max(0, i-60):min(len(h), i+60)])
		}
	}
	check("ranked offers", ranked, func(b *bytes.Buffer) error { return Write(b, ranked) })
	check("one offer", ranked[:1], func(b *bytes.Buffer) error { return Write(b, ranked[:1]) })
	check("none", []market.Ranked{}, func(b *bytes.Buffer) error { return Write(b, []market.Ranked{}) })

	f := 2.5
	odd := []jsonOdd{
		{Name: pick(), Tags: []string{pick(), pick()}, Empty: []int{}, M: map[string]any{"z": 1, "a": []any{}, "m": map[string]any{}, pick(): pick()},
			EmptyM: map[string]string{}, Raw: json.RawMessage(`{ "x" : [ 1 , {} ] }`), Ptr: &f, Nested: [][]any{{}, {1, "x", nil, []any{[]any{}}}}},
		{Raw: json.RawMessage(`null`), Offer: &ranked[0].Offer},
		{Name: strings.Repeat(`\"`, 50), Raw: json.RawMessage(`"str\"ing"`)},
	}
	check("other shapes", odd, func(b *bytes.Buffer) error { return Write(b, odd) })
	ints := []int{1, -2, 3}
	check("scalars", ints, func(b *bytes.Buffer) error { return Write(b, ints) })
	ss := []string{"", `"`, "{[,:]}"}
	check("strings", ss, func(b *bytes.Buffer) error { return Write(b, ss) })
}

// BenchmarkWrite: 20,000 ranked offers, hand-indented beside
// json.MarshalIndent per row (what Write did before).
func BenchmarkWrite(b *testing.B) {
	rows := make([]market.Ranked, 20_000)
	for i := range rows {
		rows[i] = market.Ranked{Offer: market.Offer{ID: int64(i), GPUName: "RTX 4090", Geolocation: "Texas, US", DPHTotal: 0.3 + float64(i)/1e5,
			CPUCoresEffective: 16, Verification: "verified", Reliability: 0.99}, Score: float64(i) / 7}
	}
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			if err := Write(io.Discard, rows); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshalindent", func(b *testing.B) {
		for b.Loop() {
			for i := range rows {
				if _, err := json.MarshalIndent(&rows[i], "  ", "  "); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
