package job

import (
	"fmt"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
)

// Payback is whether a replacement for a culled node is expected to pay
// for itself before the job ends, and the figures it was judged on.
//
// The replacement is judged on the offer it would be rented from. It is
// expected to deliver what the fleet's nodes truly delivered per unit
// their listings advertised (PerUnit: the units the job ranks by, as
// market.Quantity counts them, cores for vcpu; the mean over the nodes,
// so that the market's share of hosts short of their listing counts
// against the offer as it did against the fleet), times the units the
// offer lists, once it has loaded (Load: rented, booted, prepared). It
// costs its $/hr for the time left, plus its image pull. It pays when it
// is expected to deliver at least the fleet's median per dollar over its
// whole stay, the load and the pull delivering nothing:
//
//	PerUnit × Units × (Left − Load) / Median ≥ DPH × Left + Pull
//
// so that a replacement never lowers what the fleet delivers per dollar.
// (A node just over the cull's bar is kept, but is no node to rent.)
// Left is the time the job has left: until max_duration, or sooner the
// items left at the rate the fleet has done them so far. With neither it
// is unknown, and the offer is judged on what it delivers per dollar
// while it runs.
type Payback struct {
	// OfferID is the offer judged: the first one a replacement would be
	// rented from that pays, else the first one; 0 when none is left.
	OfferID int64   `json:"offer_id,omitempty"`
	DPH     float64 `json:"dph"`
	// Units is what the offer advertises of what the job ranks by (its
	// cores for vcpu) and PerUnit the metric the fleet delivered per
	// advertised unit.
	Units   float64       `json:"units"`
	PerUnit float64       `json:"per_unit"`
	Pull    float64       `json:"pull"`
	Load    time.Duration `json:"load_ns"`
	Left    time.Duration `json:"left_ns"`
	LeftOf  string        `json:"left_of"`
	Median  float64       `json:"median_per_dph"`
	// Cost and Worth are the two sides ($; both 0 when Left is unknown);
	// Share is the replacement's expected metric per dollar over its stay
	// as a share of the median: it pays at 1 or more.
	Cost  float64 `json:"cost"`
	Worth float64 `json:"worth"`
	Share float64 `json:"share"`
	Pays  bool    `json:"pays"`
}

// stay is how long a replacement would stay and be loading, and the
// fleet's figures it is judged against.
type stay struct {
	pull       float64
	load, left time.Duration
	known      bool
	of         string
	median     float64
	perUnit    float64
	units      func(*market.Offer) float64 // market.Quantity of the job's ranking
}

// payback judges a replacement rented from offer o.
func (s stay) payback(o market.Ranked) Payback {
	units := s.units(&o.Offer)
	p := Payback{OfferID: o.ID, DPH: o.DPHTotal, Units: units, PerUnit: s.perUnit, Pull: s.pull, Load: s.load,
		Left: s.left, LeftOf: s.of, Median: s.median}
	if o.DPHTotal <= 0 || s.median <= 0 {
		return p
	}
	rate := s.perUnit * units // the metric it is expected to report
	if !s.known {
		p.Share = rate / o.DPHTotal / s.median
		p.Pays = p.Share >= 1
		return p
	}
	p.Cost = o.DPHTotal*s.left.Hours() + s.pull
	delivered := rate * max(s.left-s.load, 0).Hours()
	p.Worth = delivered / s.median
	if p.Cost > 0 {
		p.Share = p.Worth / p.Cost
	}
	p.Pays = s.left > s.load && p.Worth >= p.Cost
	return p
}

// timeLeft is how long the job has left elapsed into its run: until
// maxDuration (0: none), or sooner the items left at the rate done so
// far; known is false with neither.
func timeLeft(maxDuration, elapsed time.Duration, itemsDone, itemsLeft int64) (left time.Duration, known bool, of string) {
	if maxDuration > 0 {
		left, known, of = max(maxDuration-elapsed, 0), true, fmt.Sprintf("max_duration %s", maxDuration)
	}
	if itemsDone > 0 && itemsLeft > 0 && elapsed > 0 {
		eta := time.Duration(float64(elapsed) / float64(itemsDone) * float64(itemsLeft))
		if !known || eta < left {
			left, known, of = eta, true, fmt.Sprintf("%d item(s) left at %d done in %s", itemsLeft, itemsDone, elapsed.Round(time.Second))
		}
	}
	if !known {
		of = "unknown: no max_duration, no items"
	}
	return left, known, of
}

// Line is the payback in words.
func (p Payback) Line() string {
	if p.OfferID == 0 && p.DPH > 0 {
		// A record written before replacements were judged on an offer.
		return fmt.Sprintf("at $%.3f/hr, %.0f%% of the median per dollar over its stay", p.DPH, 100*p.Share)
	}
	if p.OfferID == 0 {
		return "no offer is left to rent it from"
	}
	offer := fmt.Sprintf("offer %d at $%.3f/hr for %g unit(s), at the fleet's %.4g per unit", p.OfferID, p.DPH, p.Units, p.PerUnit)
	if p.Cost == 0 {
		return fmt.Sprintf("%s: time left %s; it would deliver %.0f%% of the median per dollar while it runs (it pays at 100%%)",
			offer, p.LeftOf, 100*p.Share)
	}
	return fmt.Sprintf("%s: %s left (%s), %s to load: with a $%.4f pull it would cost $%.4f and deliver %.0f%% of the median per dollar over its stay (it pays at 100%%)",
		offer, p.Left.Round(time.Second), p.LeftOf, p.Load.Round(time.Second), p.Pull, p.Cost, 100*p.Share)
}
