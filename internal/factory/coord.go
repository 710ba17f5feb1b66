package factory

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/agentbin"
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/depthplot"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/search"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// CoordOptions are what a coordinator is started with (coord, up).
type CoordOptions struct {
	Addr         string
	TLS          bool
	AgentBin     string // --agent-bin (agentbin.Options.Flag)
	OrphanAfter  time.Duration
	OrphanPolicy string
	Interval     time.Duration // heartbeats told to agents
	// Tunnel: agents reach the coordinator through reverse SSH tunnels,
	// dialling TunnelBase + instance id % 10000 on their node. Unless
	// TunnelSet (the user said), StartCoord turns them on for vast.ai
	// with a loopback address, which instances cannot reach otherwise.
	Tunnel, TunnelSet bool
	TunnelBase        int
	// DepthQuery is the offers the dashboard's market-depth plot ranks
	// (empty: no plot).
	DepthQuery string
}

// StartCoord starts a coordinator (coord.Start) serving the agent binary
// found for this market, its costs, members and bad hosts from this data
// dir, on the market's clock; with the simulated marketplace the command
// declared Needs.SimHosts, so the simulated machines run while it runs.
func (f *Factory) StartCoord(ctx context.Context, o *CoordOptions) (*coord.Running, error) {
	loopback, err := coord.CheckListen(o.Addr, o.TLS, o.OrphanPolicy)
	if err != nil {
		return nil, err
	}
	if !o.TunnelSet && f.Opts.Market == "vast" && loopback {
		o.Tunnel = true
	}
	tunnelBase := 0
	if o.Tunnel {
		tunnelBase = o.TunnelBase
	}
	dir, err := f.DataDir()
	if err != nil {
		return nil, err
	}
	arch := "amd64" // vast.ai's hosts
	if f.Opts.Market == "sim" {
		arch = runtime.GOARCH // the simulator's hosts are this machine
	}
	agentBin, err := agentbin.Load(ctx, agentbin.Options{Flag: o.AgentBin, CacheDir: filepath.Join(dir, "cache"), Arch: arch,
		Log: func(s string) { fmt.Fprintln(f.IO.ErrOut, s) }})
	if err != nil {
		return nil, err
	}
	if _, err := f.Provider(ctx); err != nil {
		return nil, err
	}
	clk := f.Clock()
	return coord.Start(ctx, coord.Listen{Addr: o.Addr, Dir: dir, TLS: o.TLS, TunnelBase: tunnelBase}, coord.Config{
		Log: f.Log, Clock: clk, HeartbeatInterval: o.Interval,
		OrphanAfter: o.OrphanAfter, OrphanPolicy: o.OrphanPolicy,
		AgentBinary: agentBin, Costs: f.FleetCosts, MarketDepth: f.depthPlot(o.DepthQuery),
		Members:  &fleet.Membership{Store: f.ReadStore, Provider: f.Provider, Log: f.Log},
		BadHosts: launch.BadHosts{Store: f.ReadStore, Clock: clk}, RevokeEvery: fleet.RevokeEvery,
		Durable: f.durable,
	})
}

// depthPlot draws the depth curve of the offers query matches, ranked by
// vCPU per $/hr, as `market depth --plot` does; nil for no query.
func (f *Factory) depthPlot(query string) func(context.Context) ([]byte, error) {
	if strings.TrimSpace(query) == "" {
		return nil
	}
	return func(ctx context.Context) ([]byte, error) {
		q, warnings, err := search.ParseQuery(strings.Fields(query), market.ParseOptions{NoDefault: true, Type: "on-demand", Order: "score-", Storage: 5, Strict: true})
		for _, w := range warnings {
			fmt.Fprintf(f.IO.ErrOut, "warning: %s\n", termsafe.Line(string(w)))
		}
		if err != nil {
			return nil, err
		}
		s, err := market.ScoreBy("vcpu")
		if err != nil {
			return nil, err
		}
		ranked, err := f.LiveRanked(ctx, q, search.Options{Sweep: 1000, Page: 1000, Scorer: s})
		if err != nil {
			return nil, err
		}
		tops := []int{10, 30, 50, 100, 200, 300}
		return []byte(depthplot.SVG(depthplot.Curve(ranked, 300, tops), tops, s.Name())), nil
	}
}

// reapEvery is how often, in market time, a running coordinator applies
// the teardown ladders and looks for instances whose agent fell silent.
const reapEvery = 15 * time.Second

// ReapWhileCoordinating applies the fleets' teardown ladders and reaps
// silent instances every reapEvery of market time while the coordinator
// runs (ReapPass), with the switch the coordinator tells agents (p's):
// each fleet's own, after and policy only where a fleet recorded none.
// Silence counts from the coordinator's start at the earliest (it heard
// nobody while it was down).
func (f *Factory) ReapWhileCoordinating(ctx context.Context, p fleet.Pass) {
	p.Since = f.Clock().Now()
	// reapEvery is market time: on a simulated market that runs faster
	// than the wall, a ladder step is due that much sooner, so the pass
	// comes as often in market time (once a wall second at most).
	fleet.PassEvery(ctx, max(time.Duration(float64(reapEvery)/f.SimScale()), time.Second), f.Log, func(ctx context.Context) error {
		return f.ReapPass(ctx, p)
	})
}

// ReapPass is one pass of a running coordinator's reaping
// (fleet.Manager.ReapPass) with p's heartbeats, switch and reports: it
// looks through the store first, and takes the data dir's lock only for
// a pass that has something to do, so that ls, launch and destroy in
// other terminals are not kept waiting.
func (f *Factory) ReapPass(ctx context.Context, p fleet.Pass) error {
	dir, err := f.DataDir()
	if err != nil {
		return err
	}
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return err
	}
	look := &fleet.Manager{S: st, Clock: f.Clock(), Log: f.Log} // reads only
	p.Writer = func(ctx context.Context) (*fleet.Manager, func(), error) {
		lock, err := store.AcquireLock(dir, ReapHolder)
		if err != nil {
			return nil, nil, err
		}
		prov, err := f.Provider(ctx)
		if err != nil {
			lock.Unlock()
			return nil, nil, err
		}
		return &fleet.Manager{P: prov, S: st, Clock: f.Clock(), Log: f.Log}, func() { lock.Unlock() }, nil
	}
	return look.ReapPass(ctx, p)
}

// Reap is `reap`: s's sweep (fleet.Manager.Sweep) of the refreshed
// fleets, with the heartbeats of this data dir's coordinator if one ever
// ran.
func (f *Factory) Reap(ctx context.Context, s fleet.Sweep) (fleet.Swept, error) {
	m, err := f.Refreshed(ctx, HolderName("reap"))
	if err != nil {
		return fleet.Swept{}, err
	}
	var db *coord.DB
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	s.Heartbeats = func(ctx context.Context) (fleet.Heartbeats, error) {
		var err error
		if db, err = f.ExistingCoordDB(ctx); db == nil {
			return nil, err
		}
		return db, nil
	}
	return m.Sweep(ctx, s)
}
