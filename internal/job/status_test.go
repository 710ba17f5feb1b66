package job

import (
	"testing"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/store"
)

// TestPerDPH: each metric is summed over the live instances that report
// it and divided by what those instances cost, not the whole fleet's
// price; instances with no report count as not reporting.
func TestPerDPH(t *testing.T) {
	live := []store.Instance{{ID: 1, DPHTotal: 0.5}, {ID: 2, DPHTotal: 1.5}, {ID: 3, DPHTotal: 2}}
	reports := map[int64]coord.Reported{
		1: {Metrics: map[string]float64{"hashes_per_s": 100, "loss": 2}},
		2: {Metrics: map[string]float64{"hashes_per_s": 300}},
		9: {Metrics: map[string]float64{"hashes_per_s": 1e9}}, // destroyed: not live
	}
	got, n := perDPH(live, reports)
	if n != 2 || got["hashes_per_s"] != 200 || got["loss"] != 4 || len(got) != 2 {
		t.Errorf("perDPH = %v from %d nodes; want hashes_per_s 200 (400 / $2/hr), loss 4, from 2", got, n)
	}
	if got, n := perDPH(live, nil); got != nil || n != 0 {
		t.Errorf("no reports: %v, %d", got, n)
	}
}
