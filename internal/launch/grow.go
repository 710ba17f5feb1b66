package launch

import (
	"context"
	"fmt"
	"slices"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/store"
)

// Grow rents add more instances into a fleet whose launch is over (a job
// replacing a node it culled), through the launch's own loop: the same
// create body and sessions, its stored ranked offers (never one that has
// an intent in the fleet, nor a machine on the bad-host list), the same
// readiness gates, backfill of failed boots up to three rentals each. It
// leaves the fleet's other instances alone and never parks. What is not
// ready by the boot timeout, or when ctx ends, is destroyed: nothing of a
// failed grow stays rented. The summary's ReadyIDs are the new instances.
// accept, when not nil, leaves out the offers it refuses (a job rents a
// replacement only from an offer expected to pay for itself).
//
// The launch's budget still holds: what the fleet has cost so far counts
// against it. Only one Grow may run on a fleet at a time.
func Grow(ctx context.Context, m *fleet.Manager, fleetName string, add int, events func(Event), checks Checks, accept func(market.Ranked) bool) (Summary, error) {
	r, err := growRunner(ctx, m, fleetName, add, events, checks, accept)
	if err != nil {
		return Summary{}, err
	}
	r.emit(Event{Event: EvStart, At: r.since, Msg: fmt.Sprintf("adding %d instance(s) to fleet %s: at most %d rentals, %s to be ready",
		add, fleetName, r.spec.MaxRentals, r.spec.Deadline)})
	return r.loop(ctx)
}

// Offers are a fleet's offers for a Grow: Next are those it would rent
// from now, in the order it would (the stored ranking, less the offers
// the fleet has tried, the machines on the bad-host list and, unless the
// spec allows it, the machines the fleet runs on); Listed is every offer
// the launch ranked, by id (the listings its instances were rented from
// among them).
type Offers struct {
	Next   []market.Ranked
	Listed map[int64]market.Offer
}

// GrowOffers reads the fleet's Offers.
func GrowOffers(ctx context.Context, m *fleet.Manager, fleetName string) (Offers, error) {
	r, err := growRunner(ctx, m, fleetName, 1, nil, Checks{}, nil)
	if err != nil {
		return Offers{}, err
	}
	o := Offers{Listed: r.byOff}
	for _, c := range r.cands {
		if r.usable(c) {
			o.Next = append(o.Next, c)
		}
	}
	return o, nil
}

// growRunner is a Grow's runner of add instances, the fleet's instances
// and offers loaded beside it, renting only from the offers accept takes.
func growRunner(ctx context.Context, m *fleet.Manager, fleetName string, add int, events func(Event), checks Checks, accept func(market.Ranked) bool) (*runner, error) {
	f := opsOf(m)
	_, st, err := loadStored(ctx, f, fleetName, "grow")
	if err != nil {
		return nil, err
	}
	spec := growSpec(st.Spec.WithDefaults(), add)
	spec.Checks = checks
	now := f.Clock().Now()
	bad, err := badHosts(ctx, f, now)
	if err != nil {
		return nil, err
	}
	cands, _, _, err := rentOrder(spec, st.Candidates)
	if err != nil {
		return nil, err
	}
	if accept != nil {
		cands = slices.DeleteFunc(cands, func(c market.Ranked) bool { return !accept(c) })
	}
	r := newRunner(f, spec, cands, events, bad, newWindow(now, spec.Deadline), now)
	if err := r.besides(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// growSpec is the launch's spec for a Grow of add instances: no parking,
// no spares, the boot timeout as its deadline, destroy-all on interrupt.
func growSpec(s Spec, add int) Spec {
	s.Count, s.MinReady = add, add
	s.Park, s.ParkAll, s.Spare = false, false, -1
	s.Deadline = s.BootTimeout
	s.MaxRentals = 3 * add
	s.OnInterrupt = InterruptDestroyAll
	return s
}

// besides loads what the fleet holds into a Grow's runner without
// tracking it: its instances (left alone, their machines taken), the
// offers already tried, and its spend so far (for the budget).
func (r *runner) besides(ctx context.Context) error {
	name := r.spec.Fleet
	intents, err := r.f.FleetIntents(ctx, name)
	if err != nil {
		return err
	}
	for _, it := range intents {
		r.usedOffers[it.OfferID] = true
	}
	ins, err := r.f.FleetInstances(ctx, name)
	if err != nil {
		return err
	}
	r.others = make(map[int64]bool, len(ins))
	for _, in := range ins {
		r.others[in.ID] = true
		r.usedOffers[in.OfferID] = true
		if in.GoneAt.IsZero() && in.Wanted != store.WantDestroy {
			r.machines[in.MachineID]++
		}
	}
	if c, err := r.f.Cost(ctx, name); err == nil {
		r.spent = c.Compute + c.Storage
		for _, ic := range c.Instances {
			r.bwBefore += ic.Bandwidth
		}
	}
	return nil
}
