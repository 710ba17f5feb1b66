package sim

import (
	"reflect"
	"sort"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
)

// depth ranks the market-facts.md filter by vCPU per $/hr and sums the
// top N. The filter is written out by hand so the calibration does not
// depend on the query engine.
func depth(offers []market.Offer, ns ...int) (cpu, dph []float64) {
	var pool []market.Offer
	for _, o := range offers {
		c := o.Country()
		if o.Rentable && o.InetUp >= 200 && o.InetDown >= 200 && o.CPUCoresEffective > 16 &&
			c != "CN" && c != "HK" && o.DPHTotal <= 5 {
			pool = append(pool, o)
		}
	}
	sort.SliceStable(pool, func(i, j int) bool {
		return pool[i].CPUCoresEffective/pool[i].DPHTotal > pool[j].CPUCoresEffective/pool[j].DPHTotal
	})
	for _, n := range ns {
		var c, d float64
		for i := 0; i < n && i < len(pool); i++ {
			c += pool[i].CPUCoresEffective
			d += pool[i].DPHTotal
		}
		cpu, dph = append(cpu, c), append(dph, d)
	}
	return cpu, dph
}

func TestOffersCalibratedToMarketFacts(t *testing.T) {
	want := []struct {
		n        int
		cpu, dph float64
	}{{10, 676, 1.12}, {100, 8272, 21.2}, {300, 20564, 86}}
	for _, seed := range []int64{1, 2, 3} {
		offers := GenerateOffers(seed, DefaultOffers)
		cpu, dph := depth(offers, 10, 100, 300)
		for i, w := range want {
			t.Logf("seed %d top %d: %.0f vCPU $%.2f/h (target %.0f, $%.2f)", seed, w.n, cpu[i], dph[i], w.cpu, w.dph)
			if cpu[i] < w.cpu*0.5 || cpu[i] > w.cpu*1.5 || dph[i] < w.dph*0.5 || dph[i] > w.dph*1.5 {
				t.Errorf("seed %d top %d: %.0f vCPU $%.2f/h, want within ±50%% of %.0f vCPU $%.2f/h", seed, w.n, cpu[i], dph[i], w.cpu, w.dph)
			}
		}
	}
}

func TestGenerateOffersDeterministic(t *testing.T) {
	a, b := GenerateOffers(7, 500), GenerateOffers(7, 500)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different offers")
	}
	c := GenerateOffers(8, 500)
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds gave the same offers")
	}
	for _, p := range gpuProfiles {
		if _, ok := market.LookupGPU(p.name); !ok {
			t.Errorf("profile %q is not a known GPU model", p.name)
		}
	}
	cncount := 0
	for _, o := range GenerateOffers(1, DefaultOffers) {
		if o.Country() == "CN" || o.Country() == "HK" {
			cncount++
		}
		if o.Reliability < 0.8 || o.Reliability > 0.999 || o.MinBid >= o.DPHBase || o.DPHTotal <= o.DPHBase {
			t.Fatalf("implausible offer %+v", o)
		}
		if _, ok := modelByName[o.GPUName]; !ok {
			t.Fatalf("unknown GPU %q", o.GPUName)
		}
	}
	if share := float64(cncount) / DefaultOffers; share < 0.05 || share > 0.12 {
		t.Errorf("CN+HK share %.3f, want about 0.08", share)
	}
}
