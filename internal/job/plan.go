package job

import (
	"fmt"
	"strings"

	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/plan"
)

// PickOption is the index of the planner's option labelled want
// (best_value when unset); the cheapest when no option carries the label.
func PickOption(opts []plan.Option, want string) int {
	if want == "" {
		want = jobfile.OptionBestValue
	}
	label := strings.ReplaceAll(want, "_", " ")
	for i, o := range opts {
		for _, l := range strings.Split(o.Label, ", ") {
			if l == label {
				return i
			}
		}
	}
	return 0
}

// PlannedOffers are the offers a planned job launches from: the picked
// option first, then only offers of its class (plan.Accepted) as hedges
// and replacements, so a job announced on one GPU never runs on one at
// several times the price; the picked option's estimate; and what the
// user accepted, for the launch to hold (launch.Spec.Accepted).
func PlannedOffers(t plan.Task, r plan.Req, opts []plan.Option, pick int, offers []market.Offer) ([]market.Ranked, Estimate, *launch.Accepted) {
	o := opts[pick]
	acc := &launch.Accepted{Offer: o.OfferID, Est: map[int64]float64{o.OfferID: o.EstTotal}}
	cands := []market.Ranked{{Offer: o.Offer}}
	for _, a := range plan.Accepted(t, r, o, offers) {
		if a.OfferID == o.OfferID {
			continue
		}
		cands = append(cands, market.Ranked{Offer: a.Offer})
		acc.Est[a.OfferID] = a.EstTotal
	}
	return cands, PlannedEstimate(o), acc
}

// PlannedEstimate is what the planner estimated for the option it picked.
func PlannedEstimate(o plan.Option) Estimate {
	return Estimate{Total: o.EstTotal,
		Of: fmt.Sprintf("the planner's option %d (%s): %.2f h at $%.3f/hr plus transfer", o.Rank, o.Label, o.EstHours, o.DPHTotal)}
}
