package job

import (
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/plan"
)

// TestPlannedOffers: the option the task file names is rented first, the
// estimate is the picked one's.
func TestPlannedOffers(t *testing.T) {
	t.Parallel()
	opts := []plan.Option{
		{Rank: 1, Label: "cheapest", EstTotal: 1, Offer: market.Offer{ID: 10}},
		{Rank: 2, Label: "best value", EstTotal: 2, Offer: market.Offer{ID: 20}},
		{Rank: 3, Label: "fastest", EstTotal: 5, Offer: market.Offer{ID: 30}},
	}
	for want, idx := range map[string]int{"": 1, "best_value": 1, "fastest": 2, "cheapest": 0, "unknown": 0} {
		if got := PickOption(opts, want); got != idx {
			t.Errorf("PickOption(%q) = %d, want %d", want, got, idx)
		}
	}
	est := PlannedEstimate(opts[2])
	if est.Total != 5 || !strings.Contains(est.Of, "option 3 (fastest)") {
		t.Errorf("estimate %+v", est)
	}
}
