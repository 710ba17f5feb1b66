package launch

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
)

// ErrCaps: the caps cannot fit the asked count; nothing was rented.
var ErrCaps = errors.New("caps cannot fit the fleet")

// Plan is what CheckCaps expects the launch to rent first.
type Plan struct {
	// Picked are the first Count feasible candidates, in rank order, that
	// fit under MaxDPH.
	Picked []market.Ranked
	DPH    float64 // their dph_total summed
	// Horizon is the time the budget projection covers: the deadline, or
	// boot timeout + release timeout without one.
	Horizon time.Duration
	// Bandwidth is the picked offers' image pulls (Spec.ImageGB at each
	// offer's inet_down_cost).
	Bandwidth float64
	// Projected is DPH × Horizon + Bandwidth: what the launch costs at most
	// if every instance billed its full dph_total for the whole horizon
	// (parking and slow boots make the real figure lower; replacements can
	// add to it, and are only made while spent + committed stays under the
	// budget).
	Projected float64
	// Budget is the budget the launch runs under: Spec.Budget, or the
	// default (DefaultBudget) when Spec.BudgetAuto asks for it.
	Budget float64
}

// BudgetHeadroom multiplies the default budget's base (see DefaultBudget).
const BudgetHeadroom = 1.5

// DefaultBudget is the budget of a launch given none: Count × the median
// $/hr of the picked offers × the horizon, plus the image pulls of every
// rental the launch may make (replacements pull the image again), with
// BudgetHeadroom; never below the projection itself.
func DefaultBudget(s Spec, p Plan) float64 {
	prices := make([]float64, len(p.Picked))
	for i, c := range p.Picked {
		prices[i] = c.DPHTotal
	}
	sort.Float64s(prices)
	median := 0.0
	if n := len(prices); n > 0 {
		median = (prices[(n-1)/2] + prices[n/2]) / 2
	}
	pulls := p.Bandwidth
	if s.Count > 0 && s.MaxRentals > s.Count {
		pulls *= float64(s.MaxRentals) / float64(s.Count)
	}
	base := float64(s.Count)*median*p.Horizon.Hours() + pulls
	return math.Ceil(max(BudgetHeadroom*base, 1.25*p.Projected)*100) / 100
}

func horizon(s Spec) time.Duration {
	if s.Deadline > 0 {
		return s.Deadline
	}
	return s.BootTimeout + s.ReleaseTimeout
}

// feasible filters candidates: not on a bad machine, one offer per machine
// unless allowed.
func feasible(s Spec, cands []market.Ranked, bad map[int64]bool) []market.Ranked {
	seen := map[int64]bool{}
	var out []market.Ranked
	for _, c := range cands {
		if bad[c.MachineID] || c.DPHTotal <= 0 {
			continue
		}
		if !s.AllowSameMachine {
			if seen[c.MachineID] {
				continue
			}
			seen[c.MachineID] = true
		}
		out = append(out, c)
	}
	return out
}

// CheckCaps decides, before anything is rented, whether the caps can fit
// the count; bad names machines to skip. The error names the figures and
// the fix.
func CheckCaps(s Spec, cands []market.Ranked, bad map[int64]bool) (Plan, error) {
	s = s.WithDefaults()
	f := feasible(s, cands, bad)
	p := Plan{Horizon: horizon(s)}
	if len(f) < s.Count {
		return p, fmt.Errorf("%w: only %d usable offers (of %d candidates, after skipping bad hosts and repeated machines) for --count %d; widen the query or lower --count",
			ErrCaps, len(f), len(cands), s.Count)
	}
	if err := checkMaxDPH(s, f); err != nil {
		return p, err
	}
	for _, c := range f {
		if len(p.Picked) == s.Count {
			break
		}
		if s.MaxDPH > 0 && p.DPH+c.DPHTotal > s.MaxDPH {
			continue
		}
		p.Picked = append(p.Picked, c)
		p.DPH += c.DPHTotal
		p.Bandwidth += c.PullCost(s.ImageGB)
	}
	if len(p.Picked) < s.Count {
		return p, fmt.Errorf("%w: in rank order only %d offers fit under --max-dph $%.3f/hr; raise --max-dph or rank by price (--by)",
			ErrCaps, len(p.Picked), s.MaxDPH)
	}
	p.Projected = p.DPH*p.Horizon.Hours() + p.Bandwidth
	p.Budget = s.Budget
	if s.BudgetAuto && p.Budget == 0 {
		p.Budget = DefaultBudget(s, p)
	}
	if p.Budget > 0 && p.Budget < p.Projected {
		return p, fmt.Errorf("%w: --budget $%.2f is below the $%.2f the launch may spend (%d offers at $%.3f/hr for the %s %s, plus $%.2f of image pulls); raise --budget to at least %.2f, lower --count, or shorten --deadline",
			ErrCaps, p.Budget, p.Projected, s.Count, p.DPH, p.Horizon, horizonName(s), p.Bandwidth, p.Projected)
	}
	return p, nil
}

// checkMaxDPH refuses a --max-dph that even the cheapest Count of the
// feasible offers f exceed, naming the count that fits.
func checkMaxDPH(s Spec, f []market.Ranked) error {
	if s.MaxDPH <= 0 {
		return nil
	}
	prices := make([]float64, len(f))
	for i, c := range f {
		prices[i] = c.DPHTotal
	}
	sort.Float64s(prices)
	cheapest := 0.0
	for _, v := range prices[:s.Count] {
		cheapest += v
	}
	fit, acc := 0, 0.0
	for _, v := range prices {
		if acc+v > s.MaxDPH {
			break
		}
		acc += v
		fit++
	}
	if cheapest > s.MaxDPH {
		return fmt.Errorf("%w: the cheapest %d offers cost $%.3f/hr together, above --max-dph $%.3f/hr; raise --max-dph to at least %.3f or lower --count to %d",
			ErrCaps, s.Count, cheapest, s.MaxDPH, cheapest, fit)
	}
	return nil
}

func horizonName(s Spec) string {
	if s.Deadline > 0 {
		return "deadline"
	}
	return "boot + release timeouts"
}

// priceAt reprices candidates for the disk the launch allocates: a search's
// dph_total includes storage for the search's allocated_storage, and a
// different --disk changes what the rental bills (storage_cost is $/GB per
// month). The caps are checked on these prices.
func priceAt(cands []market.Ranked, disk float64) []market.Ranked {
	if disk <= 0 {
		return cands
	}
	out := make([]market.Ranked, len(cands))
	for i, c := range cands {
		if c.StorageCost > 0 && !c.IsBid {
			st := provider.StorageRate(c.StorageCost, disk)
			c.DPHTotal = c.DPHBase + st
			c.StorageTotalCost = st
		}
		out[i] = c
	}
	return out
}

// ErrBidTooLow: a fixed --bid is below the min_bid of every candidate;
// nothing was rented.
var ErrBidTooLow = errors.New("bid below every offer's min_bid")

// bidAt prices candidates at the launch's bid: dph_total becomes the bid
// plus storage for disk, so that the caps, the budget and the spend count
// what the rentals pay (dph_base keeps the on-demand compute price, the
// bound of a rebid). Offers whose min_bid is above a fixed bid are dropped:
// vast refuses such a create. skipped is how many; lowest is the lowest
// min_bid among them.
func bidAt(cands []market.Ranked, b Bid, disk float64) (out []market.Ranked, skipped int, lowest float64) {
	out = make([]market.Ranked, 0, len(cands))
	for _, c := range cands {
		p, ok := b.For(c.Offer)
		if !ok {
			skipped++
			if lowest == 0 || c.MinBid < lowest {
				lowest = c.MinBid
			}
			continue
		}
		if disk > 0 && c.StorageCost > 0 {
			c.StorageTotalCost = provider.StorageRate(c.StorageCost, disk)
		}
		c.DPHTotal = p + c.StorageTotalCost
		c.IsBid = true
		out = append(out, c)
	}
	return out, skipped, lowest
}
