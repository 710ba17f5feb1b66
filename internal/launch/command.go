package launch

import (
	"context"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
)

// Env is what a launch command takes from the composition root (the
// factory): the writer's manager held as holder, the fleet key on the
// account, and the bid watcher.
type Env interface {
	Manager(ctx context.Context, holder string) (*fleet.Manager, error)
	RegisterFleetKey(ctx context.Context, p provider.Provider)
	StartBidWatcher()
}

// Command is a launch as the command line runs it, on View: the data
// dir held as Holder, the gates from Checks, and after an interrupt the
// instances' outcome asked when Ask.
type Command struct {
	Env    Env
	Holder string
	Checks func(ctx context.Context, fleetName string) (Checks, error)
	View   *View
	Ask    bool
}

// OnInterrupt is what a launch does on Ctrl+C: as given, else asked
// (after the interrupt, on a terminal: keep until then), else
// destroy-unready.
func OnInterrupt(given string, canAsk bool) (mode string, ask bool) {
	switch {
	case given != "":
		return given, false
	case canAsk:
		return InterruptKeep, true
	}
	return InterruptDestroyUnready, false
}

// New launches spec's fleet from cands (Run), its teardown ladder
// recorded first (BeforeRenting).
func (c Command) New(ctx context.Context, spec Spec, cands []market.Ranked, ladder fleet.Ladder) error {
	m, err := c.Env.Manager(ctx, c.Holder)
	if err != nil {
		return err
	}
	if err := BeforeRenting(ctx, m, spec.Fleet, ladder); err != nil {
		return err
	}
	c.Env.RegisterFleetKey(ctx, m.P)
	if spec.Checks, err = c.Checks(ctx, spec.Fleet); err != nil {
		return err
	}
	sum, err := Run(ctx, m, spec, cands, c.View.Event)
	if spec.Bid != nil && sum.Rented > 0 {
		c.Env.StartBidWatcher()
	}
	return c.View.Finish(ctx, m, spec.Fleet, sum, err, c.Ask)
}

// Resume goes on with the launch of fleetName (Resume).
func (c Command) Resume(ctx context.Context, fleetName string) error {
	m, err := c.Env.Manager(ctx, c.Holder)
	if err != nil {
		return err
	}
	c.Env.RegisterFleetKey(ctx, m.P)
	checks, err := c.Checks(ctx, fleetName)
	if err != nil {
		return err
	}
	sum, err := Resume(ctx, m, fleetName, c.View.Event, checks)
	if sum.Rented > 0 {
		c.Env.StartBidWatcher() // it ends at once when none of them bids
	}
	return c.View.Finish(ctx, m, fleetName, sum, err, c.Ask)
}
