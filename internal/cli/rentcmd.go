package cli

import (
	"context"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/rental"
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
	v, err := rental.RentOne(ctx, f, factory.HolderName("rent", strconv.FormatInt(opts.OfferID, 10)), rental.One{
		Rent:    launch.Rent{Image: opts.Image, Disk: opts.Disk, Env: opts.Env, Onstart: opts.Onstart, Direct: opts.Direct, Bid: opts.Bid},
		OfferID: opts.OfferID, Fleet: opts.Fleet, Label: opts.Label, Timeout: opts.Timeout, NoWait: opts.NoWait}, f.IO.ErrOut)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), v)
	}
	return fleet.WriteInstances(f.IO.Out, f.IO.ErrOut, []fleet.InstanceView{v})
}
