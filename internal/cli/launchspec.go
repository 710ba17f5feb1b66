package cli

import (
	"context"
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
	onInterrupt, ask := launch.OnInterrupt(opts.OnInterrupt, f.IO.InTTY && !opts.JSON)
	c := launch.Command{Env: f, Ask: ask, View: launch.NewView(f.IO, opts.Stream(f.IO.Out)),
		Checks: func(ctx context.Context, fleetName string) (launch.Checks, error) {
			return f.LaunchChecks(ctx, opts.ReadyCheck, opts.Coord, opts.CoordSHA256, fleetName)
		}}
	if opts.Resume != "" {
		c.Holder = factory.HolderName("launch", "--resume", opts.Resume)
		return c.Resume(ctx, opts.Resume)
	}
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
	cands, err := opts.candidates(ctx, f, opts.Query)
	if err != nil {
		return err
	}
	if opts.WaitFor != "" {
		poll := func(ctx context.Context) ([]market.Ranked, error) { return opts.candidates(ctx, f, opts.Query) }
		if cands, err = launch.WaitForWindow(ctx, opts.WaitFor, opts.Count, poll, opts.WaitMax, f.Clock(), f.IO.ErrOut); err != nil {
			return err
		}
	}
	c.Holder = factory.HolderName("launch", "--fleet", spec.Fleet, "--count", strconv.Itoa(spec.Count))
	return c.New(ctx, spec, cands, opts.Ladder)
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
	args = o.query.toRent(f, args, o.Disk, "launching from")
	ranked, _, err := rankedOffers(ctx, f, &o.query, &o.rank, args, o.query.SweepLimit)
	return ranked, err
}
