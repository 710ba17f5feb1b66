package sim

import (
	"math"
	"reflect"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
)

// TestOffersCalibratedToMarketFacts: on seeds 1–5 the default market's
// depth (market-facts.md's filter, ranked by vCPU per $/hr) lands within
// ±30% of the published table on every row, for vCPU, RAM and $/hr.
// `vastfleet sim depth --seeds 1-5` prints the same table.
func TestOffersCalibratedToMarketFacts(t *testing.T) {
	t.Parallel()
	var ns []int
	for _, w := range PublishedDepth {
		ns = append(ns, w.N)
	}
	for seed := int64(1); seed <= 5; seed++ {
		rows := Depth(GenerateOffers(seed, DefaultOffers), ns...)
		for i, r := range rows {
			w := PublishedDepth[i]
			t.Logf("seed %d top %3d: %6.0f vCPU %6.0f GB $%6.2f/h (published %6.0f, %6.0f, $%6.2f)", seed, r.N, r.VCPU, r.RAMGB, r.DPH, w.VCPU, w.RAMGB, w.DPH)
			for _, c := range []struct {
				what      string
				got, want float64
			}{{"vCPU", r.VCPU, w.VCPU}, {"RAM GB", r.RAMGB, w.RAMGB}, {"$/hr", r.DPH, w.DPH}} {
				if dev := c.got/c.want - 1; math.Abs(dev) > 0.30 {
					t.Errorf("seed %d top %d: %s %.2f is %+.0f%% off the published %.2f, want within ±30%%", seed, r.N, c.what, c.got, 100*dev, c.want)
				}
			}
		}
	}
}

func TestGenerateOffersDeterministic(t *testing.T) {
	t.Parallel()
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
		if o.country() == "CN" || o.country() == "HK" {
			cncount++
		}
		if o.Reliability < 0.8 || o.Reliability > 0.999 || o.MinBid >= o.DPHBase || o.DPHTotal <= o.DPHBase {
			t.Fatalf("implausible offer %+v", o)
		}
		if _, ok := gpuHardware[o.GPUName]; !ok {
			t.Fatalf("unknown GPU %q", o.GPUName)
		}
	}
	if share := float64(cncount) / DefaultOffers; share < 0.05 || share > 0.12 {
		t.Errorf("CN+HK share %.3f, want about 0.08", share)
	}
}
