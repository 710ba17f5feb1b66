package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/store"
)

type rentOptions struct {
	// OfferID is the offer to rent (the positional OFFER_ID).
	OfferID int64
	Image   string
	Disk    float64
	Env     string
	Onstart string
	Label   string
	Fleet   string
	Direct  bool
	Bid     float64
	Timeout time.Duration
	NoWait  bool
	cmdutil.JSONFlags
}

// newRentCmd parses into rentOptions and hands them to runF (tests) or
// rentRun.
func newRentCmd(f *factory.Factory, runF func(context.Context, *rentOptions) error) *cobra.Command {
	opts := &rentOptions{}
	cmd := &cobra.Command{
		Use:   "rent OFFER_ID",
		Short: "Rent one offer and wait until the instance runs",
		Long: `Rent one offer. vastfleet records an intent before the call and labels the
instance with it, so a lost response or a crash never leaves an instance it does
not know about. It waits until the instance is running (and says so when loading
takes over 5 minutes), then prints its ssh address.`,
		Example: `  vastfleet rent 12345 --image pytorch/pytorch:latest --disk 40`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return usagef("offer id %q: want a positive number from `vastfleet search`", args[0])
			}
			opts.OfferID = id
			return run(cmd, f, opts, runF, rentRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Image, "image", launch.DefaultImage, "docker image")
	fl.Float64Var(&opts.Disk, "disk", launch.DefaultDisk, "disk GB")
	fl.StringVar(&opts.Env, "env", "", "environment: 'KEY=V;KEY2=V2' (TCP_PORTS=8000 and UDP_PORTS=9000 open those ports), or the vastai CLI's Docker flags '-e KEY=V -p 8000:8000'")
	fl.StringVar(&opts.Onstart, "onstart", "", "command to run when the instance starts")
	fl.StringVar(&opts.Label, "label", "", "experiment name recorded with the instance")
	fl.StringVar(&opts.Fleet, "fleet", "default", "fleet the instance belongs to")
	fl.BoolVar(&opts.Direct, "direct", false, "direct SSH (ports on the host) instead of the marketplace's proxy")
	fl.Float64Var(&opts.Bid, "bid", 0, "interruptible: bid $/hr per machine (0: on-demand)")
	fl.DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "give up waiting for running after this long (marketplace time)")
	fl.BoolVar(&opts.NoWait, "no-wait", false, "return once the rental is recorded")
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print the instance as JSON")
	limitFlags(fl, bounds{"disk", ">0", "100000"}, bounds{"bid", "0", "1000"}, bounds{"timeout", "0", "720h"})
	// The market moves while rent waits for the boot.
	return withNeeds(f, cmd, func([]string) factory.Needs { return factory.Needs{WaitsOnMarket: !opts.NoWait} })
}

// rentRun is `rent` once its flags are parsed.
func rentRun(ctx context.Context, f *factory.Factory, opts *rentOptions) error {
	offerID := opts.OfferID
	req, err := launch.Rent{Image: opts.Image, Disk: opts.Disk, Env: opts.Env, Onstart: opts.Onstart, Direct: opts.Direct, Bid: opts.Bid}.CreateRequest()
	if err != nil {
		return err
	}
	if err := fleet.ValidateFleetName(opts.Fleet); err != nil {
		return usageError{err}
	}
	m, err := f.Manager(ctx, factory.HolderName("rent", strconv.FormatInt(offerID, 10)))
	if err != nil {
		return err
	}
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return fmt.Errorf("reconcile before renting: %w", err)
	}
	f.RegisterFleetKey(ctx, m.P)
	rec, err := m.Rent(ctx, fleet.RentRequest{Fleet: opts.Fleet, OfferID: offerID, Create: req, Experiment: opts.Label})
	if err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "rented offer %d as instance %d\n", offerID, rec.ID)
	if opts.Bid > 0 {
		f.StartBidWatcher()
	}
	if !opts.NoWait {
		rec, err = m.AwaitRunning(ctx, rec.ID, opts.Timeout, f.IO.ErrOut)
		if err != nil {
			return err
		}
	}
	views, err := m.InstanceViews(ctx, []store.Instance{rec}, f.Clock().Now())
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), views[0])
	}
	return fleet.WriteInstances(f.IO.Out, f.IO.ErrOut, views)
}
