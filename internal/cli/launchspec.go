package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
)

// usage refuses flags that contradict each other or the command, before
// anything runs (launch.Request.Check).
func (o *launchOptions) usage() error {
	typ, err := o.Request.Check(launch.Asked{OnInterrupt: o.OnInterrupt, Resume: o.Resume, From: o.From, Query: o.Query,
		Coord: o.Coord, Items: o.Items, OnShortHardware: o.OnShortHardware, ReadyCheck: o.ReadyCheck, Ladder: o.Ladder,
		Type: o.query.Type, TypeSet: o.typeSet, Score: o.rank.Score, By: o.rank.By})
	o.query.Type = typ
	return err
}

// launchRun is `launch` once its flags are parsed: a new launch or a
// resumed one.
func launchRun(ctx context.Context, f *factory.Factory, opts *launchOptions) error {
	onInterrupt := opts.OnInterrupt
	ask := onInterrupt == "" && f.IO.InTTY && !opts.JSON
	if onInterrupt == "" {
		onInterrupt = launch.InterruptDestroyUnready
		if ask {
			onInterrupt = launch.InterruptKeep // decided by the question after the interrupt
		}
	}
	if opts.Resume != "" {
		return launchResume(ctx, f, opts, ask)
	}
	return launchNew(ctx, f, opts, onInterrupt, ask)
}

// launchResume goes on with the launch of fleet --resume; ask: the
// interrupt's outcome is asked on the terminal.
func launchResume(ctx context.Context, f *factory.Factory, opts *launchOptions, ask bool) error {
	m, err := f.Manager(ctx, factory.HolderName("launch", "--resume", opts.Resume))
	if err != nil {
		return err
	}
	f.RegisterFleetKey(ctx, m.P)
	checks, err := launchChecks(ctx, f, opts, opts.Resume)
	if err != nil {
		return err
	}
	view := launch.NewView(f.IO, opts.Stream(f.IO.Out))
	sum, err := launch.Resume(ctx, m, opts.Resume, view.Event, checks)
	if sum.Rented > 0 {
		f.StartBidWatcher() // it ends at once when none of them bids
	}
	return view.Finish(ctx, m, opts.Resume, sum, err, ask)
}

// launchNew launches a new fleet from the ranked offers.
func launchNew(ctx context.Context, f *factory.Factory, opts *launchOptions, onInterrupt string, ask bool) error {
	args := opts.Query
	spec, err := opts.spec(onInterrupt)
	if err != nil {
		return err
	}
	if opts.Coord != "" {
		if err := withAgent(ctx, f, &spec, opts); err != nil {
			return err
		}
	}
	opts.rank.spec = &spec // --by useful ranks for this launch
	cands, err := opts.candidates(ctx, f, args)
	if err != nil {
		return err
	}
	if opts.WaitFor != "" {
		if cands, err = waitForWindow(ctx, f, opts, args); err != nil {
			return err
		}
	}
	m, err := f.Manager(ctx, factory.HolderName("launch", "--fleet", spec.Fleet, "--count", strconv.Itoa(spec.Count)))
	if err != nil {
		return err
	}
	if err := launch.BeforeRenting(ctx, m, spec.Fleet, opts.Ladder); err != nil {
		return err
	}
	f.RegisterFleetKey(ctx, m.P)
	if spec.Checks, err = launchChecks(ctx, f, opts, spec.Fleet); err != nil {
		return err
	}
	view := launch.NewView(f.IO, opts.Stream(f.IO.Out))
	sum, err := launch.Run(ctx, m, spec, cands, view.Event)
	if spec.Bid != nil && sum.Rented > 0 {
		f.StartBidWatcher()
	}
	return view.Finish(ctx, m, spec.Fleet, sum, err, ask)
}

func (o *launchOptions) spec(onInterrupt string) (launch.Spec, error) {
	return o.Request.Spec(onInterrupt, time.Now())
}

// candidates are the ranked offers to launch from: a saved ranking, or every
// offer matching the query (swept past the search cap) ranked by --by.
func (o *launchOptions) candidates(ctx context.Context, f *factory.Factory, args []string) ([]market.Ranked, error) {
	if o.From != "" {
		if len(args) > 0 {
			return nil, usagef("--from %s and a query: the saved ranking already holds the offers", o.From)
		}
		return launch.ReadRanked(o.From, o.Bid != "")
	}
	if o.query.Storage == 5 { // price the launch's own disk, not the search default
		o.query.Storage = o.Disk
	}
	if len(args) == 0 && !o.query.NoDefault {
		fmt.Fprintf(f.IO.ErrOut, "no query: launching from offers with %s (give a query, or -n for none)\n", launch.DefaultFilter)
		args = []string{launch.DefaultFilter}
	}
	ranked, _, err := rankedOffers(ctx, f, &o.query, &o.rank, args, o.query.SweepLimit)
	return ranked, err
}

// waitForWindow polls the market until the top --count offers meet
// --wait-for, or --wait-max passes.
func waitForWindow(ctx context.Context, f *factory.Factory, opts *launchOptions, args []string) ([]market.Ranked, error) {
	cond, err := launch.ParseWaitFor(opts.WaitFor)
	if err != nil {
		return nil, usagef("--wait-for: %v", err)
	}
	poll := func(ctx context.Context) ([]market.Ranked, error) { return opts.candidates(ctx, f, args) }
	fmt.Fprintf(f.IO.ErrOut, "waiting for %s (checking every 10m, at most %s)\n", opts.WaitFor, opts.WaitMax)
	ranked, m, err := launch.WaitFor(ctx, cond, opts.Count, poll, 10*time.Minute, opts.WaitMax, f.Clock())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f.IO.ErrOut, "price window open: top %d give %.0f vCPU at $%.3f/hr\n", m.N, m.VCPU, m.DPH)
	return ranked, nil
}
