package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
)

// usage refuses flags that contradict each other or the command, before
// anything runs.
func (o *launchOptions) usage() error {
	switch o.OnInterrupt {
	case "", launch.InterruptKeep, launch.InterruptDestroyUnready, launch.InterruptDestroyAll:
	default:
		return usagef("--on-interrupt %q: use keep, destroy-unready or destroy-all", o.OnInterrupt)
	}
	if o.Resume != "" {
		if len(o.Query) > 0 || o.From != "" {
			return usagef("--resume continues a stored launch: give no query or --from")
		}
		return nil
	}
	if err := o.pricing(); err != nil {
		return err
	}
	if err := o.Ladder.Validate(); err != nil {
		return usagef("%v: --idle-after and --idle-below go together, durations are positive", err)
	}
	if o.Ladder.IdleAfter > 0 && o.Coord == "" {
		return usagef("--idle-after needs --coord: only each instance's agent sees its CPU and GPU use, and it stops its instance itself")
	}
	if o.Items != "" && o.Coord == "" {
		return usagef("--items needs --coord: the coordinator hands the items out")
	}
	if _, err := launch.ParseOnShort(o.OnShortHardware); err != nil {
		return usagef("--on-short-hardware %q: use replace, warn or keep", o.OnShortHardware)
	}
	switch o.ReadyCheck {
	case "", "auto", "ssh", "running":
	default:
		return usagef("--ready-check %q: use ssh, running or auto", o.ReadyCheck)
	}
	if o.From != "" {
		if len(o.Query) > 0 {
			return usagef("--from %s and a query: the saved ranking already holds the offers", o.From)
		}
	} else if o.rank.Score != "" && o.rank.By != "" {
		return usagef("--by %s and --score: pick one", o.rank.By)
	}
	return nil
}

// launchRun is `launch` once its flags are parsed: a new launch or a
// resumed one.
func launchRun(ctx context.Context, f *factory, opts *launchOptions) error {
	f.waitsOnMarket = true
	args := opts.Query
	onInterrupt := opts.OnInterrupt
	ask := onInterrupt == "" && f.io.InTTY && !opts.JSON
	if onInterrupt == "" {
		onInterrupt = launch.InterruptDestroyUnready
		if ask {
			onInterrupt = launch.InterruptKeep // decided by the question after the interrupt
		}
	}
	if opts.Resume != "" {
		m, err := f.manager(ctx, holderName("launch", "--resume", opts.Resume))
		if err != nil {
			return err
		}
		f.registerFleetKey(ctx, m.P)
		checks, err := f.launchChecks(ctx, opts, opts.Resume)
		if err != nil {
			return err
		}
		view := newLaunchView(f, opts.JSONFlags)
		sum, err := launch.Resume(ctx, m, opts.Resume, view.event, checks)
		return view.finish(ctx, f, m, opts.Resume, sum, err, ask)
	}

	spec, err := opts.spec(onInterrupt)
	if err != nil {
		return err
	}
	if opts.Coord != "" {
		if err := f.withAgent(ctx, &spec, opts); err != nil {
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
	m, err := f.manager(ctx, holderName("launch", "--fleet", spec.Fleet, "--count", strconv.Itoa(spec.Count)))
	if err != nil {
		return err
	}
	if err := beforeRenting(ctx, m, spec.Fleet, opts.Ladder); err != nil {
		return err
	}
	f.registerFleetKey(ctx, m.P)
	if spec.Checks, err = f.launchChecks(ctx, opts, spec.Fleet); err != nil {
		return err
	}
	view := newLaunchView(f, opts.JSONFlags)
	sum, err := launch.Run(ctx, m, spec, cands, view.event)
	return view.finish(ctx, f, m, spec.Fleet, sum, err, ask)
}

// pricing checks that the ranking's prices are the rentals' prices: --bid
// rents interruptible and ranks at bid prices (the query type bid), and
// without it the rentals are on demand, so a ranking at bid or reserved
// prices would promise prices the rentals do not get.
func (o *launchOptions) pricing() error {
	bidType := o.query.Type == "bid" || o.query.Type == "interruptible"
	if o.Bid == "" {
		switch {
		case bidType:
			return usagef("--type %s ranks offers at interruptible prices, but without --bid the rentals would be on demand: add --bid min (each offer's min_bid + 5%%) or --bid PRICE", o.query.Type)
		case o.query.Type != "on-demand":
			return usagef("--type %s: launch rents on demand or, with --bid, interruptible; drop --type, or add --bid min for interruptible", o.query.Type)
		case o.OnOutbid != "":
			return usagef("--on-outbid is for interruptible launches: add --bid min or --bid PRICE")
		}
		return nil
	}
	if _, err := launch.ParseBid(o.Bid); err != nil {
		return usageError{err}
	}
	switch o.OnOutbid {
	case "", launch.OutbidReplace, launch.OutbidRebid:
	default:
		return usagef("--on-outbid %q: use replace or rebid", o.OnOutbid)
	}
	if o.typeSet && !bidType {
		return usagef("--bid rents interruptible instances, but --type %s ranks offers at %s prices: drop --type (--bid ranks at bid prices) or use --type bid", o.query.Type, o.query.Type)
	}
	o.query.Type = "bid"
	return nil
}

func (o *launchOptions) spec(onInterrupt string) (launch.Spec, error) {
	if o.Count < 1 || o.Count > launch.MaxCount {
		return launch.Spec{}, usagef("--count %d: must be 1..%d", o.Count, launch.MaxCount)
	}
	if o.MinReady < 0 || o.MinReady > o.Count {
		return launch.Spec{}, usagef("--min-ready %d: must be between 1 and --count %d", o.MinReady, o.Count)
	}
	if o.MaxDPH < 0 || o.Budget < 0 {
		return launch.Spec{}, usagef("--max-dph and --budget must be positive (0 means no cap)")
	}
	if o.MaxRentals != 0 && o.MaxRentals < o.Count {
		return launch.Spec{}, usagef("--max-rentals %d: must be at least --count %d", o.MaxRentals, o.Count)
	}
	env, err := launch.ParseEnv(o.Env)
	if err != nil {
		return launch.Spec{}, usagef("--env: %v", err)
	}
	var sessions []launch.Session
	for _, s := range o.Sessions {
		sess, err := launch.ParseSession(s)
		if err != nil {
			return launch.Spec{}, usagef("--session %q: %v", s, err)
		}
		sessions = append(sessions, sess)
	}
	name := o.Fleet
	if name == "" {
		name = "fleet-" + time.Now().UTC().Format("20060102-150405")
	}
	runtype := "ssh"
	if o.Direct {
		runtype = "ssh_direc ssh_proxy"
	}
	spec := launch.Spec{
		Fleet: name, Count: o.Count, MinReady: o.MinReady, Deadline: o.Deadline,
		BootTimeout: o.BootTimeout, ReleaseTimeout: o.ReleaseTimeout,
		Park: o.Park || o.ParkAll, ParkAll: o.ParkAll, Backfill: o.Backfill, Spare: o.Spare, MaxDPH: o.MaxDPH, Budget: o.Budget, BudgetAuto: !o.BudgetSet,
		MaxRentals: o.MaxRentals, ImageGB: o.ImageGB,
		Create:   launch.Create(o.Image, o.Disk),
		Sessions: sessions, AllowSameMachine: o.AllowSameMachine, BadHostTTL: o.BadHostTTL,
		Workers: o.Workers, RentRate: o.Rate, CreateBatch: o.CreateBatch, OnInterrupt: onInterrupt,
	}
	spec.Create.Env = env
	spec.Create.Onstart = launch.Onstart(o.Onstart, sessions)
	spec.Create.Runtype = runtype
	if o.Bid != "" {
		b, err := launch.ParseBid(o.Bid)
		if err != nil {
			return launch.Spec{}, usageError{err}
		}
		b.OnOutbid = o.OnOutbid
		spec.Bid = &b
	}
	if err := spec.WithDefaults().Validate(); err != nil {
		return launch.Spec{}, usageError{err}
	}
	return spec, nil
}

// candidates are the ranked offers to launch from: a saved ranking, or every
// offer matching the query (swept past the search cap) ranked by --by.
func (o *launchOptions) candidates(ctx context.Context, f *factory, args []string) ([]market.Ranked, error) {
	if o.From != "" {
		if len(args) > 0 {
			return nil, usagef("--from %s and a query: the saved ranking already holds the offers", o.From)
		}
		b, err := os.ReadFile(o.From)
		if err != nil {
			return nil, usageError{err}
		}
		var ranked []market.Ranked
		if err := json.Unmarshal(b, &ranked); err != nil {
			return nil, usagef("--from %s: not a ranked offer list from `vastfleet search --save` (%v)", o.From, err)
		}
		if len(ranked) == 0 {
			return nil, usagef("--from %s: holds no offers", o.From)
		}
		if o.Bid == "" && slices.ContainsFunc(ranked, func(r market.Ranked) bool { return r.IsBid }) {
			return nil, usagef("--from %s holds offers priced at bids (searched with -b or -i), but without --bid the rentals would be on demand: add --bid min or --bid PRICE, or search again without -b", o.From)
		}
		return ranked, nil
	}
	if o.query.Storage == 5 { // price the launch's own disk, not the search default
		o.query.Storage = o.Disk
	}
	if len(args) == 0 && !o.query.NoDefault {
		fmt.Fprintf(f.io.ErrOut, "no query: launching from offers with %s (give a query, or -n for none)\n", launch.DefaultFilter)
		args = []string{launch.DefaultFilter}
	}
	ranked, _, err := rankedOffers(ctx, f, &o.query, &o.rank, args, o.query.SweepLimit)
	return ranked, err
}

// waitForWindow polls the market until the top --count offers meet
// --wait-for, or --wait-max passes.
func waitForWindow(ctx context.Context, f *factory, opts *launchOptions, args []string) ([]market.Ranked, error) {
	cond, err := launch.ParseWaitFor(opts.WaitFor)
	if err != nil {
		return nil, usagef("--wait-for: %v", err)
	}
	poll := func(ctx context.Context) ([]market.Ranked, error) { return opts.candidates(ctx, f, args) }
	fmt.Fprintf(f.io.ErrOut, "waiting for %s (checking every 10m, at most %s)\n", opts.WaitFor, opts.WaitMax)
	ranked, m, err := launch.WaitFor(ctx, cond, opts.Count, poll, 10*time.Minute, opts.WaitMax, f.Clock())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f.io.ErrOut, "price window open: top %d give %.0f vCPU at $%.3f/hr\n", m.N, m.VCPU, m.DPH)
	return ranked, nil
}

// beforeRenting brings the store up to the marketplace's listing and saves
// the fleet's teardown ladder, before anything is rented: the coordinator's
// pass and reap apply the ladder from the first boot.
func beforeRenting(ctx context.Context, m *fleet.Manager, fleetName string, l fleet.Ladder) error {
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return fmt.Errorf("reconcile before launching: %w", err)
	}
	if l.IsZero() {
		return nil
	}
	return fleet.SaveLadder(ctx, m.S, fleetName, l)
}
