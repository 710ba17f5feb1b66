// Package rental rents single instances by hand, outside the launch
// engine: one offer (rent) or a plan's option (plan --rent). Each reconciles,
// rents through the fleet manager, waits for running and says so; the
// engine (package launch) reaches the fleet only through FleetOps, so these
// sit beside it, not in it.
package rental

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/vastfleet/vastfleet/internal/bill"
	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// PlannedRental is a plan's option rented (plan --rent): into Fleet, with
// Image (DefaultImage when empty), labelled with the task's Model.
type PlannedRental struct {
	Fleet, Image, Model string
	Req                 plan.Req
	Option              plan.Option
	// Timeout bounds the wait for running (market time).
	Timeout time.Duration
}

// RentPlanned rents the option after a reconcile, records its estimate
// (so `vastfleet cost` shows actual against it), and waits until it runs,
// saying so on log.
func RentPlanned(ctx context.Context, m *fleet.Manager, r PlannedRental, log io.Writer) error {
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return fmt.Errorf("reconcile before renting: %w", err)
	}
	o := r.Option
	hours, total := o.EstHours, o.EstTotal
	rec, err := m.Rent(ctx, fleet.RentRequest{
		Fleet: r.Fleet, Offer: o.Offer, OfferID: o.OfferID,
		Create:   launch.Create(cmp.Or(r.Image, launch.DefaultImage), r.Req.DiskGB),
		EstHours: &hours, EstCost: &total, Experiment: r.Model,
		ImageGB: r.Req.ImageGB, // the size the plan's transfer cost was estimated at
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "rented option %d (offer %d) as instance %d; waiting for it to run\n", o.Rank, o.OfferID, rec.ID)
	rec, err = m.AwaitRunning(ctx, rec.ID, r.Timeout, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "instance %d is running: %s (estimate %.2f h, %s)\n", rec.ID, cmdutil.Dash(rec.SSHURL), hours, bill.Dollars(total))
	return nil
}

// One is a single offer rented by hand (rent): the instance as Rent asks
// it, into Fleet, labelled Label, waited for (Timeout) unless NoWait.
type One struct {
	launch.Rent
	OfferID      int64
	Fleet, Label string
	Timeout      time.Duration
	NoWait       bool
}

// RentOne rents o as the data dir's writer (env's manager, held as
// holder), after a reconcile, with the fleet key on the account and a bid
// watched; it says what it rented on log, and gives the instance's view
// as ls shows it.
func RentOne(ctx context.Context, env launch.Env, holder string, o One, log io.Writer) (fleet.InstanceView, error) {
	req, err := o.Rent.CreateRequest()
	if err != nil {
		return fleet.InstanceView{}, err
	}
	if err := fleet.ValidateFleetName(o.Fleet); err != nil {
		return fleet.InstanceView{}, usage.Error{Err: err}
	}
	m, err := env.Manager(ctx, holder)
	if err != nil {
		return fleet.InstanceView{}, err
	}
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return fleet.InstanceView{}, fmt.Errorf("reconcile before renting: %w", err)
	}
	env.RegisterFleetKey(ctx, m.P)
	rec, err := m.Rent(ctx, fleet.RentRequest{Fleet: o.Fleet, OfferID: o.OfferID, Create: req, Experiment: o.Label})
	if err != nil {
		return fleet.InstanceView{}, err
	}
	fmt.Fprintf(log, "rented offer %d as instance %d\n", o.OfferID, rec.ID)
	if o.Bid > 0 {
		env.StartBidWatcher()
	}
	if !o.NoWait {
		if rec, err = m.AwaitRunning(ctx, rec.ID, o.Timeout, log); err != nil {
			return fleet.InstanceView{}, err
		}
	}
	views, err := m.InstanceViews(ctx, []store.Instance{rec}, m.Clock.Now())
	if err != nil {
		return fleet.InstanceView{}, err
	}
	return views[0], nil
}
