package job

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/vastfleet/vastfleet/internal/bill"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/usage"
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

// Planner is what planning a job's fleet takes from its caller.
type Planner struct {
	// Search finds the offers the task's requirements allow.
	Search func(ctx context.Context, req plan.Req) ([]market.Offer, error)
	// Show shows the planner's options.
	Show func(req plan.Req, res plan.Result)
	// Ask asks which of n options to rent (1..n, else none); nil when
	// nobody is at a terminal to answer.
	Ask func(n int) int
	// Out hears which option is rented.
	Out io.Writer
}

// PlanOffers plans a job's task and picks the option to rent (the task
// file's, else the one asked for, else best value): its offer as the
// launch's candidates, the planner's estimate, and the accepted price.
func PlanOffers(ctx context.Context, jf *jobfile.Job, p Planner) ([]market.Ranked, Estimate, *launch.Accepted, error) {
	req, err := plan.Requirements(*jf.Task)
	if err != nil {
		return nil, Estimate{}, nil, usage.Error{Err: err}
	}
	offers, err := p.Search(ctx, req)
	if err != nil {
		return nil, Estimate{}, nil, err
	}
	res, err := plan.Options(*jf.Task, req, offers)
	if err != nil {
		return nil, Estimate{}, nil, fmt.Errorf("%w; nothing was rented", err)
	}
	p.Show(req, res)
	if res.OverBudget {
		return nil, Estimate{}, nil, usage.Error{Err: fmt.Errorf("every option costs more than max_budget $%.2f: nothing rented (raise it, shorten the task or quantize)", jf.Task.MaxBudget)}
	}
	pick := PickOption(res.Options, jf.Option)
	if jf.Option == "" && p.Ask != nil {
		if k := p.Ask(len(res.Options)); k > 0 {
			pick = k - 1
		}
	}
	o := res.Options[pick]
	fmt.Fprintf(p.Out, "renting option %d (%s): %dx %s at $%.3f/hr (offer %d), estimated %.2f h, %s\n", o.Rank, o.Label, o.NumGPUs, o.GPUName, o.DPHTotal, o.OfferID, o.EstHours, bill.Dollars(o.EstTotal))
	cands, est, acc := PlannedOffers(*jf.Task, req, res.Options, pick, offers)
	return cands, est, acc, nil
}
