package offerbench

import (
	"slices"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
)

func TestParseRateTakesTheLastLinesFirstWord(t *testing.T) {
	t.Parallel()
	for out, want := range map[string]float64{
		"warming up\n1234.5 hashes/s\n": 1234.5,
		"12\n\n  \n":                    12,
		"3e6":                           3e6,
	} {
		if got, err := ParseRate([]byte(out)); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", out, got, err, want)
		}
	}
	// No number, zero, negative or not finite: the probe did not pass.
	for _, out := range []string{"", "\n", "done\n", "12\ndone\n", "0\n", "-3\n", "NaN\n", "Inf\n"} {
		if got, err := ParseRate([]byte(out)); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", out, got)
		}
	}
}

func TestPickTakesOneOfferPerMachineType(t *testing.T) {
	t.Parallel()
	offer := func(id int64, gpu, cpu string, dph float64) market.Ranked {
		return market.Ranked{Offer: market.Offer{ID: id, GPUName: gpu, NumGPUs: 1, CPUName: cpu, DPHTotal: dph}}
	}
	ranked := []market.Ranked{
		offer(1, "RTX 3060", "EPYC", 0.1), offer(2, "RTX 3060", "EPYC", 0.2), // one type
		offer(3, "RTX 3060", "Xeon", 0), // no price: no figure per dollar
		offer(4, "RTX 4090", "Xeon", 0.5), offer(5, "RTX 3060", "Xeon", 0.3), offer(6, "A100", "EPYC", 1),
	}
	var got []int64
	for _, r := range Pick(ranked, 3) {
		got = append(got, r.ID)
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 4 || got[2] != 5 {
		t.Errorf("picked %v, want [1 4 5]", got)
	}
	// A type's next offers stand in for one taken before the create.
	types := pickTypes(ranked, 3, 2)
	if len(types) != 3 || len(types[0]) != 2 || types[0][1].ID != 2 || len(types[1]) != 1 || len(types[2]) != 1 {
		t.Errorf("types %v, want [[1 2] [4] [5]]", types)
	}
}

// The ranking puts the passed first by units per dollar, leaves the failed
// unranked, and measures the listing's $/vCPU pick against the best.
func TestRankByMeasuredUnitsPerDollar(t *testing.T) {
	t.Parallel()
	picks := []market.Ranked{
		{Offer: market.Offer{ID: 1, CPUCoresEffective: 64, DPHTotal: 0.1}}, // the listing's pick, spoofed
		{Offer: market.Offer{ID: 2, CPUCoresEffective: 16, DPHTotal: 0.1}},
		{Offer: market.Offer{ID: 3, CPUCoresEffective: 32, DPHTotal: 0.1}}, // timed out
	}
	rows := []Row{
		{OfferID: 1, VCPU: 64, DPH: 0.1, Status: StatusOK, UnitsPerS: 25, UnitsPerDollar: 25 * 3600 / 0.1},
		{OfferID: 2, VCPU: 16, DPH: 0.1, Status: StatusOK, UnitsPerS: 100, UnitsPerDollar: 100 * 3600 / 0.1},
		{OfferID: 3, VCPU: 32, DPH: 0.1, Status: StatusTimeout},
	}
	got, ranking, pick, share := rank(rows, picks)
	if got[0].OfferID != 2 || got[0].Rank != 1 || got[1].OfferID != 1 || got[1].Rank != 2 || got[2].Rank != 0 {
		t.Errorf("rows %+v", got)
	}
	if got[0].ListingRank != 3 || got[1].ListingRank != 1 || got[2].ListingRank != 2 {
		t.Errorf("listing ranks %d %d %d, want 3 1 2", got[0].ListingRank, got[1].ListingRank, got[2].ListingRank)
	}
	if len(ranking) != 2 || ranking[0].ID != 2 || ranking[0].Score != got[0].UnitsPerDollar {
		t.Errorf("ranking %+v", ranking)
	}
	if pick != 1 || share == nil || *share != 0.25 {
		t.Errorf("listing pick %d share %v, want 1 at 0.25", pick, share)
	}
}

// TestRerankPutsMeasuredTypesFirst: a launch's candidates are ordered by
// their type's measured units per second over their own $/hr; types no
// probe reached follow in the listing's order, and types whose probe
// failed are left out.
func TestRerankPutsMeasuredTypesFirst(t *testing.T) {
	t.Parallel()
	offer := func(id int64, gpu string, dph float64) market.Ranked {
		return market.Ranked{Offer: market.Offer{ID: id, GPUName: gpu, NumGPUs: 1, CPUName: "EPYC", DPHTotal: dph}, Score: 1000 - float64(id)}
	}
	cands := []market.Ranked{offer(1, "A", 1), offer(2, "B", 1), offer(3, "A", 2), offer(4, "C", 1), offer(5, "D", 1), offer(6, "B", 0.5)}
	res := Result{Rows: []Row{
		{Type: "A / EPYC", Status: StatusOK, UnitsPerS: 10},
		{Type: "B / EPYC", Status: StatusOK, UnitsPerS: 4},
		{Type: "C / EPYC", Status: "failed"},
	}}
	got := Rerank(cands, res)
	var ids []int64
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	// A at $1: 36000/$, B at $0.5: 28800, A at $2: 18000, B at $1: 14400;
	// D unprobed; C failed.
	if want := []int64{1, 6, 3, 2, 5}; !slices.Equal(ids, want) {
		t.Errorf("reranked %v, want %v", ids, want)
	}
	if got[0].Score != 36000 || got[4].Score != 995 {
		t.Errorf("scores %v and %v, want 36000 and the listing's 995", got[0].Score, got[4].Score)
	}
}
