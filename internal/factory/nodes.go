package factory

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/nodes"
	"github.com/vastfleet/vastfleet/internal/offerbench"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// FleetKey is the data dir's fleet key, made the first time.
func (f *Factory) FleetKey() (*nodes.Key, error) {
	dir, err := f.DataDir()
	if err != nil {
		return nil, err
	}
	return nodes.LoadKey(filepath.Join(dir, "ssh"))
}

// SelectNodes resolves --fleet/--all/IDs to running instances with an SSH
// route (nodes.Select). A command that connects to the nodes declares
// Needs.SimHosts, so that the in-process simulator's have machines.
func (f *Factory) SelectNodes(ctx context.Context, fleetName string, all bool, ids []int64) ([]nodes.Node, provider.Provider, error) {
	if (fleetName != "") == all && len(ids) == 0 || (len(ids) > 0 && (fleetName != "" || all)) {
		return nil, nil, usage.Errorf("name the nodes: --fleet F, --all, or instance IDs (one of them)")
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return nil, nil, err
	}
	ns, err := nodes.Select(ctx, st, p, nodes.Selection{Fleet: fleetName, All: all, IDs: ids})
	return ns, p, nodes.AsUsage(err)
}

// NodeOps runs operations on nodes for this command, closed with it.
func (f *Factory) NodeOps(p provider.Provider, parallel int) (*nodes.Ops, error) {
	key, err := f.FleetKey()
	if err != nil {
		return nil, err
	}
	o := nodes.New(key, p, nodes.Config{Parallel: parallel, Sim: f.Opts.Market == "sim", Out: f.IO.Out, ErrOut: f.IO.ErrOut})
	f.closers = append(f.closers, o.Close)
	return o, nil
}

// runningNodes are the running instances among ids, as nodes with the
// operations that reach them; none (nil ops) when none runs.
func (f *Factory) runningNodes(ctx context.Context, st *store.Store, ids []int64) ([]nodes.Node, *nodes.Ops, error) {
	running := nodes.Running(ctx, st, ids)
	if len(running) == 0 {
		return nil, nil, nil
	}
	ns, p, err := f.SelectNodes(ctx, "", false, running)
	if err != nil {
		return nil, nil, err
	}
	o, err := f.NodeOps(p, 64)
	return ns, o, err
}

// uncollected returns the running instances among ids whose results
// directory holds a file newer than their last collect (or any file, never
// collected), and the ones that could not be checked.
func (f *Factory) uncollected(ctx context.Context, st *store.Store, ids []int64, resultsDir string) (map[int64]string, error) {
	ns, o, err := f.runningNodes(ctx, st, ids)
	if o == nil {
		return map[int64]string{}, err
	}
	return o.Uncollected(ctx, ns, resultsDir)
}

// CollectNodes pulls each node's changed results into to/<fleet>/<node>/
// and marks the collect on the node.
func (f *Factory) CollectNodes(ctx context.Context, p provider.Provider, ns []nodes.Node, remoteDir, to string, parallel int) ([]nodes.CollectRow, error) {
	o, err := f.NodeOps(p, parallel)
	if err != nil {
		return nil, err
	}
	return o.Collect(ctx, ns, remoteDir, to, parallel)
}

// collectBeforeDestroy is destroy --collect: every running node's results
// into ./results, refusing the destroy when a node could not be collected.
func (f *Factory) collectBeforeDestroy(ctx context.Context, st *store.Store, ids []int64, resultsDir string) error {
	ns, o, err := f.runningNodes(ctx, st, ids)
	if o == nil {
		return err
	}
	return o.CollectFirst(ctx, ns, resultsDir, "results", f.IO.ErrOut)
}

// SyncNodes sends each node the files of src (as scanned) that it lacks
// under dest, relayed node to node unless noRelay, and says what it cost.
func (f *Factory) SyncNodes(ctx context.Context, p provider.Provider, ns []nodes.Node, src string, files []remote.TreeFile, dest string, parallel, seeds int, noRelay bool) ([]nodes.SyncRow, error) {
	o, err := f.NodeOps(p, parallel)
	if err != nil {
		return nil, err
	}
	rows, sum, err := o.Sync(ctx, ns, nodes.SyncOptions{Src: src, Files: files, Dest: dest, Parallel: parallel, Seeds: seeds, NoRelay: noRelay})
	if err != nil {
		return nil, err
	}
	fmt.Fprint(f.IO.ErrOut, sum)
	return rows, nil
}

// KeepTunnels keeps a reverse tunnel from every running instance of
// fleets (all when none) to the coordinator c (nodes.Tunnels), from base,
// in the background until ctx ends; it says so, and why it stopped if it
// did.
func (f *Factory) KeepTunnels(ctx context.Context, c *coord.Running, base int, fleets []string) {
	fmt.Fprintf(f.IO.ErrOut, "reverse tunnels: agents reach it on their node's 127.0.0.1:%d+ID%%10000 over vastfleet's SSH connections\n", base)
	go f.keepTunnels(ctx, c, base, fleets)
}

func (f *Factory) keepTunnels(ctx context.Context, c *coord.Running, base int, fleets []string) {
	err := func() error {
		p, err := f.Provider(ctx)
		if err != nil {
			return err
		}
		ops, err := f.NodeOps(p, 64)
		if err != nil {
			return err
		}
		return (&nodes.Tunnels{Store: f.ReadStore, Provider: p, Ops: ops, Log: f.Log, Base: base, Local: nodes.LoopbackOf(c.Addr), Fleets: fleets}).Keep(ctx)
	}()
	if err != nil {
		f.Log.Error("tunnels stopped", "err", err)
		fmt.Fprintf(f.IO.ErrOut, "reverse tunnels: %v\n", err)
	}
}

// OfferBench is what bench offers and a task file's probe rent and reach
// the probed instances with: the manager (holder, its fleet key
// registered) and node operations for parallel probes at once, and that
// number: 0 is all, or one at a time on the simulator, whose machines
// share this computer's cores.
func (f *Factory) OfferBench(ctx context.Context, holder string, parallel int) (offerbench.Deps, int, error) {
	m, err := f.Manager(ctx, holder)
	if err != nil {
		return offerbench.Deps{}, 0, err
	}
	f.RegisterFleetKey(ctx, m.P)
	if parallel == 0 && f.Opts.Market == "sim" {
		parallel = 1
	}
	ops, err := f.NodeOps(m.P, max(parallel, 1))
	if err != nil {
		return offerbench.Deps{}, 0, err
	}
	return offerbench.Deps{Manager: m, Ops: ops}, parallel, nil
}

// ResultsGuard is what destroy checks before it destroys ids
// (fleet.DestroyRequest.Guard): with collect, every running node's
// results collected first; then no node may hold results newer than its
// last collect (nodes.UncollectedError).
func (f *Factory) ResultsGuard(st *store.Store, collect bool, resultsDir string) func(context.Context, []int64) error {
	return func(ctx context.Context, ids []int64) error {
		if collect {
			if err := f.collectBeforeDestroy(ctx, st, ids, resultsDir); err != nil {
				return err
			}
		}
		left, err := f.uncollected(ctx, st, ids, resultsDir)
		if err != nil {
			return fmt.Errorf("checking for uncollected results: %w (--force destroys without checking)", err)
		}
		return nodes.UncollectedError(ids, left)
	}
}
