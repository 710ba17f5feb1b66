package launch

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/vastfleet/vastfleet/internal/bill"
	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/plan"
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
		Create:   Create(cmp.Or(r.Image, DefaultImage), r.Req.DiskGB),
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
