package market

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomTermOffers varies every field a fast term reads, with repeats so
// that equality terms hit.
func randomTermOffers(r *rand.Rand, n int) []Offer {
	small := func() float64 { return float64(r.IntN(6)) * 0.5 }
	places := []string{"Texas, US", "US", "Hanoi, VN", "Beijing, CN", "CN", "", "Tokyo,JP", "Quebec, CA"}
	names := []string{"RTX 4090", "RTX 3090", "H100 SXM", ""}
	offers := make([]Offer, n)
	for i := range offers {
		offers[i] = Offer{
			ID: int64(r.IntN(8)), MachineID: int64(r.IntN(4)), NumGPUs: r.IntN(4), GPUName: names[r.IntN(len(names))],
			GPURAM: float64(r.IntN(3)) * 1000, CPURAM: float64(r.IntN(4)) * 500, CPUCores: r.IntN(5),
			CPUCoresEffective: small(), InetUp: small() * 100, InetDown: small() * 100, DiskSpace: small() * 10,
			DPHTotal: small() - 0.5, Reliability: small() / 3, Verification: []string{"verified", "unverified"}[r.IntN(2)],
			Geolocation: places[r.IntN(len(places))], DriverVers: int64(r.IntN(3)), HostingType: r.IntN(2),
			CUDAMaxGood: small() * 4,
		}
	}
	return offers
}

// TestFastTermsMatchClosures compiles random queries over the fields fast
// terms cover and checks that Match (fast) and the closures agree on every
// offer, term by term and for the whole filter.
func TestFastTermsMatchClosures(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	offers := randomTermOffers(r, 400)
	numCols := []string{"num_gpus", "gpu_ram", "cpu_ram_GB", "cpu_cores", "cpu_cores_effective", "inet_up", "inet_down",
		"disk_space", "dph_total", "dph", "reliability", "reliability2", "driver_version", "id", "machine_id", "cuda_vers", "hosting_type"}
	strCols := []string{"gpu_name", "verification", "geolocation"}
	numOps := []string{"eq", "neq", "gt", "gte", "lt", "lte", "in", "notin"}
	strOps := []string{"eq", "neq", "in", "notin"}
	numVal := func() any {
		switch r.IntN(4) {
		case 0:
			return fmt.Sprint(float64(r.IntN(6)) * 0.5) // the CLI sends strings
		case 1:
			return float64(r.IntN(6)) * 0.5
		case 2:
			return r.IntN(4)
		}
		return float64(r.IntN(3)) * 1000
	}
	strVal := func() any {
		return []string{"US", "CN", "Texas, US", "verified", "RTX 4090", "", "Tokyo,JP"}[r.IntN(7)]
	}
	fastTerms, queries := 0, 0
	for range 3000 {
		q := Query{Filters: map[string]map[string]any{}}
		for range 1 + r.IntN(4) {
			var col, op string
			var val any
			if r.IntN(3) == 0 {
				col, op = strCols[r.IntN(len(strCols))], strOps[r.IntN(len(strOps))]
				val = strVal()
				if op == "in" || op == "notin" {
					val = []any{strVal(), strVal()}
				}
			} else {
				col, op = numCols[r.IntN(len(numCols))], numOps[r.IntN(len(numOps))]
				val = numVal()
				if op == "in" || op == "notin" {
					val = []any{numVal(), numVal(), numVal()}
				}
			}
			if q.Filters[col] == nil {
				q.Filters[col] = map[string]any{}
			}
			q.Filters[col][op] = val
		}
		if r.IntN(5) == 0 {
			q.AllocatedStorage = small(r)
		}
		f, err := Compile(q)
		if err != nil {
			t.Fatalf("%v: %v", q.Filters, err)
		}
		queries++
		if !f.allFast {
			continue
		}
		if len(f.fast) != len(f.preds) {
			t.Fatalf("%v: %d fast terms for %d closures", q.Filters, len(f.fast), len(f.preds))
		}
		fastTerms += len(f.fast)
		for i := range offers {
			o := &offers[i]
			for j := range f.fast {
				if got, want := f.fast[j].match(o), f.preds[j](o); got != want {
					t.Fatalf("term %q on %+v: fast %v, closure %v", f.terms[j], *o, got, want)
				}
			}
			if got, want := f.Match(o), f.matchClosures(o); got != want {
				t.Fatalf("%v on offer %d: Match %v, closures %v", q.Filters, i, got, want)
			}
		}
	}
	// The comparison must have exercised fast terms, not skipped them all.
	if fastTerms < 2000 {
		t.Fatalf("only %d fast terms compared over %d queries", fastTerms, queries)
	}
}

func small(r *rand.Rand) float64 { return float64(r.IntN(6)) * 5 }

// TestFastTermsCoverRecipeQuery: the query bench rank times runs on fast
// terms alone.
func TestFastTermsCoverRecipeQuery(t *testing.T) {
	q, _, err := Parse("cpu_cores_effective>8 inet_up>=100 inet_down>=100 geolocation notin [CN,VN] dph_total<=1.5", ParseOptions{NoDefault: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Compile(q)
	if err != nil {
		t.Fatal(err)
	}
	if !f.allFast || len(f.fast) != len(f.preds) {
		t.Fatalf("fast %v: %d fast terms for %d closures", f.allFast, len(f.fast), len(f.preds))
	}
	offers := syntheticOffers(5000)
	var fast, slow []int
	for i := range offers {
		if f.Match(&offers[i]) {
			fast = append(fast, i)
		}
		if f.matchClosures(&offers[i]) {
			slow = append(slow, i)
		}
	}
	if len(fast) == 0 || !slices.Equal(fast, slow) {
		t.Fatalf("fast kept %d, closures %d", len(fast), len(slow))
	}
}

// TestSortRowsEqualsStableSort: the radix sort gives the stable sort's
// order by rank key, ties (equal scores, -0 and +0, bad offers, equal
// prices and ids) included.
func TestSortRowsEqualsStableSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 5, radixMin - 1, radixMin, 1000, 20_000} {
		for trial := range 5 {
			rows := make([]rankRow, n)
			for i := range rows {
				k := rankKey{score: float64(r.IntN(50)) / 7, dph: float64(r.IntN(5)), id: int64(r.IntN(20))}
				switch r.IntN(10) {
				case 0:
					k.bad, k.score = true, 0
				case 1:
					k.score = -k.score
				case 2:
					k.score = math.Copysign(0, -1)
				case 3:
					k.score = r.NormFloat64() * 1e300
				case 4:
					k.score = math.SmallestNonzeroFloat64 * float64(r.IntN(3))
				}
				if trial == 0 {
					k.score = 1 // one key for all: the runs carry the whole order
				}
				rows[i] = rankRow{k, int32(i)}
			}
			want := slices.Clone(rows)
			slices.SortStableFunc(want, func(a, b rankRow) int { return a.compare(&b.rankKey) })
			got := slices.Clone(rows)
			sortRows(got)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("n=%d trial %d: row %d is %+v, the stable sort has %+v", n, trial, i, got[i], want[i])
				}
			}
		}
	}
}
