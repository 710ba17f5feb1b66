package factory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/bidwatch"
	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/localmarket"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/search"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// Manager wires the lifecycle manager to the marketplace, the store and the
// marketplace's clock. Writers hold the data dir's lock.
func (f *Factory) Manager(ctx context.Context, holder string) (*fleet.Manager, error) {
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, err
	}
	st, err := f.Store(ctx, true, holder)
	if err != nil {
		return nil, err
	}
	return &fleet.Manager{P: p, S: st, Clock: f.Clock(), Log: f.Log, SelfStops: f.deadManMoments(st)}, nil
}

// keepMarketMoving makes a paced virtual clock run on by itself once the
// launch that waited on it is over, so that the market's time passes for
// the agents, billing and the coordinator as it would on a scaled clock.
// The clock still stands while vastfleet works (a job's sync and setup,
// say), so a busy computer does not make the agents' heartbeats late in
// market time; steadyMarket changes that once the job's run starts.
func (f *Factory) keepMarketMoving() {
	v := f.virtual
	if v == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v.Sleep(ctx, time.Second) == nil {
		}
	}()
	f.closers = append(f.closers, func() error { cancel(); <-done; return nil })
}

// steadyMarket makes the market move steadily at its pace from the start
// of a job's run, under the capacity model (--sim-capacity-scale) alone:
// the machines then run the job's real processes at the speed of their
// true cores, which take wall time however busy vastfleet is, so a node
// is billed in proportion to the time it works, the fleet and a late
// replacement alike (the cull's hashes per dollar compare). Before the
// run (the launch, the job's sync and setup) market time moves only
// while vastfleet waits.
func (f *Factory) steadyMarket() {
	if v := f.virtual; v != nil && f.Opts.SimCapacityScale > 0 {
		v.SetSteady(true)
	}
}

// Refreshed returns the writer's manager after reconciling the store with
// the marketplace (reap acts on what it shows). Commands that only look
// use observed, which needs no lock.
func (f *Factory) Refreshed(ctx context.Context, holder string) (*fleet.Manager, error) {
	m, err := f.Manager(ctx, holder)
	if err != nil {
		return nil, err
	}
	return f.reconciled(ctx, m, fleet.ReconcileOptions{}), nil
}

// reconciled brings m's store up to the marketplace's listing and keeps
// the orphans it found to show: never dropped, each one bills. A failed
// reconcile leaves the store as it was, and the command shows that.
func (f *Factory) reconciled(ctx context.Context, m *fleet.Manager, opts fleet.ReconcileOptions) *fleet.Manager {
	rep, err := m.Reconcile(ctx, opts)
	if err != nil {
		fmt.Fprintf(f.IO.ErrOut, "warning: could not refresh from the marketplace (%v); showing the last known state\n", err)
		return m
	}
	f.orphans = rep.Orphans
	f.WarnOrphans(rep.Orphans)
	return m
}

// Observed is the fleet as the marketplace lists it now, for commands that
// only look (ls, cost). The data dir's store is copied in one read and the
// copy is reconciled with the marketplace, so these commands show fresh
// state without taking the writer lock, without writing the store and
// without waiting for a launch in another terminal. The copy is deleted
// when the command ends; writers (and `reconcile`) record what it saw.
func (f *Factory) Observed(ctx context.Context) (*fleet.Manager, error) {
	live, err := f.Store(ctx, false, "")
	if err != nil {
		return nil, err
	}
	p, perr := f.Provider(ctx)
	if errors.Is(perr, sim.ErrInUse) {
		// Another process has the simulated market open and does not
		// serve it: the state last recorded, as of when it was recorded.
		fmt.Fprintf(f.IO.ErrOut, "note: %v\nshowing the state last recorded\n", perr)
		asOf, err := live.LastListed(ctx)
		if err != nil {
			return nil, err
		}
		f.frozenAt = asOf
		return &fleet.Manager{S: live, Clock: clock.Fixed{At: asOf}, Log: f.Log}, nil
	}
	if perr != nil {
		return nil, perr
	}
	tmp, err := os.MkdirTemp("", "vastfleet-view-")
	if err != nil {
		return nil, err
	}
	snap, err := live.Snapshot(ctx, filepath.Join(tmp, "state.db"))
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	f.closers = append(f.closers, func() error {
		err := snap.Close()
		os.RemoveAll(tmp)
		return err
	})
	m := &fleet.Manager{P: p, S: snap, Clock: f.Clock(), Log: f.Log}
	return f.reconciled(ctx, m, fleet.ReconcileOptions{LookOnly: true}), nil
}

// checkStoreFile warns, before the database is opened, when the data dir
// had a store but its file is gone or empty: opening it would silently
// make a new, empty store while the instances it tracked bill on.
func (f *Factory) checkStoreFile(dir, path string) {
	ids, what := store.Lost(dir, path)
	if len(ids) == 0 {
		return
	}
	f.formerStores = ids
	if what == "" {
		return
	}
	f.lostStore = true
	fmt.Fprintf(f.IO.ErrOut, "WARNING: the state store %s %s, but this data dir had one (store %s).\n"+
		"  Instances it rented may still run and bill: `vastfleet ls` shows them as orphans,\n"+
		"  `vastfleet reconcile --adopt` tracks them again.\n", path, what, strings.Join(ids, ", "))
}

// noteStore records the open store's id in the data dir's list.
func (f *Factory) noteStore(ctx context.Context, dir string, st *store.Store) {
	id, err := st.ID(ctx)
	if err != nil {
		return
	}
	f.storeID = id
	if err := store.RememberID(dir, id, f.formerStores); err != nil {
		f.Log.Warn("could not record the store id", "dir", dir, "err", err)
	}
}

// OwnOrphan reports whether an orphan was rented from this data dir
// (fleet.OwnOrphan).
func (f *Factory) OwnOrphan(o fleet.Orphan) bool { return fleet.OwnOrphan(o, f.formerStores) }

// WarnOrphans says loudly that instances with vastfleet labels bill while
// this store does not track them, and how to take them back.
func (f *Factory) WarnOrphans(orphans []fleet.Orphan) {
	fmt.Fprint(f.IO.ErrOut, fleet.OrphanWarning(orphans, f.formerStores))
}

// OrphanViews are the orphans the last refresh found, as ls and cost
// show them.
func (f *Factory) OrphanViews() []fleet.OrphanView {
	return fleet.OrphanViews(f.orphans, f.formerStores)
}

// FrozenAt is when the store a view shows was last recorded, set when
// another process holds the simulated market (Observed); zero otherwise.
func (f *Factory) FrozenAt() time.Time { return f.frozenAt }

// deadManMoments reads, from the data dir's coordinator database where
// one exists, when each instance's agent will have stopped or destroyed
// it by its dead-man switch (fleet.DeadManMoments). A reconcile after the
// coordinator was gone for a while (up --resume, down, ls, cost) then
// dates what the agents did at the moment they did it.
func (f *Factory) deadManMoments(st *store.Store) func(context.Context) (map[int64]time.Time, error) {
	return func(ctx context.Context) (map[int64]time.Time, error) {
		db, err := f.ExistingCoordDB(ctx)
		if db == nil {
			return nil, err // no coordinator ever ran: no agent had a switch armed by one
		}
		defer db.Close()
		return fleet.DeadManMoments(ctx, st, db)
	}
}

// RegisterFleetKey puts the fleet's public key on the marketplace account
// before instances are created, so they boot accepting it and the first
// exec needs no per-instance attach (which stays as the fallback for
// instances created before, or elsewhere). The account's keys are listed
// first: the key is added only when no key with the same type and body is
// there, whatever its comment. A failure is a warning, not an error: the
// rental itself does not need the key.
func (f *Factory) RegisterFleetKey(ctx context.Context, p provider.Provider) {
	km, ok := p.(provider.KeyManager)
	if !ok {
		return
	}
	key, err := f.FleetKey()
	if err != nil {
		f.warnOnce(fmt.Sprintf("fleet SSH key: %v (instances will get it attached when first reached)", err))
		return
	}
	keys, err := km.ListSSHKeys(ctx)
	if err == nil {
		for _, k := range keys {
			if sameSSHKey(k.PublicKey, key.Authorized) {
				return
			}
		}
		_, err = km.RegisterSSHKey(ctx, key.Authorized)
	}
	if err != nil && ctx.Err() == nil {
		f.warnOnce(fmt.Sprintf("registering the fleet SSH key on the account: %v (instances will get it attached when first reached)", err))
	}
}

// sameSSHKey compares two authorized_keys lines by key type and body,
// ignoring comments and options' spacing.
func sameSSHKey(a, b string) bool {
	fa, fb := strings.Fields(a), strings.Fields(b)
	return len(fa) >= 2 && len(fb) >= 2 && fa[0] == fb[0] && fa[1] == fb[1]
}

// Operator is the marketplace client's instance operations (logs,
// execute), which every client here has.
func (f *Factory) Operator(ctx context.Context) (provider.Operator, error) {
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, err
	}
	op, ok := p.(provider.Operator)
	if !ok {
		return nil, fmt.Errorf("this marketplace client cannot fetch logs")
	}
	return op, nil
}

// FleetCosts gives the coordinator a fleet's $/hr and spend from the
// store, read only: the coordinator never holds the data dir's lock.
func (f *Factory) FleetCosts(ctx context.Context, fleetName string) (float64, float64, map[int64]float64, error) {
	st, err := f.ReadStore(ctx)
	if err != nil {
		return 0, 0, nil, err
	}
	return (&fleet.Manager{S: st, Clock: f.Clock(), Log: f.Log}).Rates(ctx, fleetName)
}

// ReadStore is the store, read only: the coordinator never holds the data
// dir's lock.
func (f *Factory) ReadStore(ctx context.Context) (*store.Store, error) {
	return f.Store(ctx, false, "")
}

// BidWatchDeps are a bid watch's on this data dir and market.
func (f *Factory) BidWatchDeps(ctx context.Context) (bidwatch.Deps, error) {
	dir, err := f.DataDir()
	if err != nil {
		return bidwatch.Deps{}, err
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return bidwatch.Deps{}, err
	}
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return bidwatch.Deps{}, err
	}
	d := bidwatch.Deps{Dir: dir, Provider: p, Store: st, Clock: f.Clock(), Log: f.Log, SelfStops: f.deadManMoments(st)}
	if f.Opts.Market == "sim" && f.Opts.APIURL == "" && f.usesLocalMarket() {
		d.MarketStopped = func(ctx context.Context) bool {
			_, ok := localmarket.Served(ctx, filepath.Join(dir, "sim"))
			return !ok
		}
	}
	return d, nil
}

// WatchBidsWhileCoordinating is the coordinator's bid watch.
func (f *Factory) WatchBidsWhileCoordinating(ctx context.Context) {
	d, err := f.BidWatchDeps(ctx)
	if err != nil {
		f.Log.Warn("no bid watch", "err", err)
		return
	}
	bidwatch.Coordinate(ctx, d)
}

// StartBidWatcher starts the data dir's bid watcher, unless
// VASTFLEET_BID_WATCH is off or the market lives only in this process.
// A watcher that cannot start costs the ledger precision only: it is
// said, never an error.
func (f *Factory) StartBidWatcher() {
	switch f.IO.Getenv("VASTFLEET_BID_WATCH") {
	case "0", "off", "false":
		return
	}
	if f.Opts.Market == "sim" && f.Opts.APIURL == "" && !f.usesLocalMarket() {
		return
	}
	dir, err := f.DataDir()
	if err != nil {
		return
	}
	exe, err := os.Executable()
	if err == nil {
		err = bidwatch.Spawn(bidwatch.Process{Exe: exe, DataDir: dir, Market: f.Opts.Market, APIURL: f.Opts.APIURL, APIRate: f.Opts.APIRate,
			Verbose: f.Opts.Verbose, APIKey: f.Opts.APIKey, Env: append(os.Environ(), RunAsMainEnv+"=1")})
	}
	if err != nil {
		fmt.Fprintf(f.IO.ErrOut, "warning: no bid watcher (%v): an outbid before the next command is dated mid-way to it\n", err)
		return
	}
	fmt.Fprintf(f.IO.ErrOut, "vastfleet: a bid watcher lists the interruptible instances every %s until none is kept (at most %s; log %s)\n",
		fleet.BidWatchEvery, fleet.BidWatchFor, filepath.Join(dir, bidwatch.LogFile))
}

// UsefulScorer is --by useful for spec (nil: the default launch), with
// this data dir's host records when it has a store.
func (f *Factory) UsefulScorer(ctx context.Context, spec *launch.Spec) (market.Scorer, error) {
	sp := launch.DefaultSpec("", 1, 10*time.Minute, false)
	if spec != nil {
		sp = *spec
	}
	if f.Opts.Market == "sim" {
		// The bans expire on the market's clock, which the simulator keeps.
		if _, err := f.Provider(ctx); err != nil {
			return nil, err
		}
	}
	var st *store.Store
	if dir, err := f.DataDir(); err == nil {
		if _, err := os.Stat(filepath.Join(dir, "state.db")); err == nil {
			if st, err = f.Store(ctx, false, ""); err != nil {
				return nil, err
			}
		}
	}
	return launch.UsefulScorer(ctx, st, sp, f.Clock().Now())
}

// BadHosts are the machines launches skip now (hosts), [] for none. Bad
// hosts expire in the marketplace's time: with the simulator, it is
// opened for its clock (if another process has it, wall time).
func (f *Factory) BadHosts(ctx context.Context, st *store.Store) ([]store.BadHost, error) {
	if f.Opts.Market == "sim" {
		if _, err := f.Provider(ctx); err != nil && !errors.Is(err, sim.ErrInUse) {
			return nil, err
		}
	}
	hs, err := st.BadHosts(ctx, f.Clock().Now())
	if hs == nil && err == nil {
		hs = []store.BadHost{} // JSON: [], not null
	}
	return hs, err
}

// LiveRanked searches this data dir's marketplace for q and ranks it
// (search.Live), its notes on the error stream; a sweep or search form
// the user asked wrong is a usage error.
func (f *Factory) LiveRanked(ctx context.Context, q market.Query, o search.Options) ([]market.Ranked, error) {
	if o.Sweep < 0 {
		return nil, usage.Errorf("--sweep-limit %d: must be positive", o.Sweep)
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, err
	}
	o.Notes = f.IO.ErrOut
	ranked, err := search.Live(ctx, p, q, o)
	if errors.Is(err, search.ErrNoNewForm) {
		return nil, usage.Errorf("--new: %v", err)
	}
	return ranked, err
}

// ImportVastInstances reads a vast-instances.json state file at path into
// the store, all or nothing, as of the market's now (import): how many
// instances it held. A file that cannot be opened or read is the user's.
func (f *Factory) ImportVastInstances(ctx context.Context, path string) (int, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, usage.Error{Err: err}
	}
	defer fh.Close()
	st, err := f.Store(ctx, true, HolderName("import", path))
	if err != nil {
		return 0, err
	}
	n, err := st.ImportVastInstances(ctx, fh, f.Clock().Now())
	if err != nil {
		return 0, usage.Errorf("%s: %v (nothing was imported)", path, err)
	}
	return n, nil
}
