package factory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/clock/remoteclock"
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/ignore"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/nodes"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// JobRecords are the data dir's job records (in the store, exported to
// jobs/<job>/job.json).
func (f *Factory) JobRecords(ctx context.Context) (*job.Records, error) {
	dir, err := f.JobsDir()
	if err != nil {
		return nil, err
	}
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return nil, err
	}
	return &job.Records{Store: st, Dir: dir}, nil
}

// LoadJob is job id's record (job.Records.Find): an unknown job is the
// user's mistake.
func (f *Factory) LoadJob(ctx context.Context, id string) (*job.Record, error) {
	recs, err := f.JobRecords(ctx)
	if err != nil {
		return nil, err
	}
	return recs.Find(ctx, id)
}

// JobsDir is the data dir's jobs/: a directory per job (logs, lock,
// exports).
func (f *Factory) JobsDir() (string, error) {
	dir, err := f.DataDir()
	return filepath.Join(dir, "jobs"), err
}

// SyncExcludes are what a job's workdir sync leaves out by default.
func SyncExcludes() []ignore.Rule {
	return ignore.Parse("", strings.Join(nodes.DefaultExcludes, "\n"))
}

// ScanWorkdir reads a job's workdir as its sync will, every file hashed.
func ScanWorkdir(dir string) error {
	_, err := remote.ScanTree(dir, SyncExcludes(), nil)
	return err
}

// WorkdirOnNode is where a job's workdir lands on a node (inside the
// simulated machine's sandbox on the simulator).
func (f *Factory) WorkdirOnNode() string {
	if f.Opts.Market == "sim" {
		return nodes.SimRelative(job.RemoteWorkdir)
	}
	return job.RemoteWorkdir
}

// JobNodes are a job's node operations over SSH on p: exec, sync and
// collect as the commands of those names run them.
func (f *Factory) JobNodes(p provider.Provider) job.Nodes { return &jobNodes{f: f, p: p} }

type jobNodes struct {
	f *Factory
	p provider.Provider
	// mu guards byID and fleet: a replacement is selected beside the
	// watch.
	mu   sync.Mutex
	byID map[int64]nodes.Node
	// fleet is the first selection, ranked: the places a replacement
	// takes, and the fleet its rank variables are of.
	fleet []nodes.Node
}

func (n *jobNodes) Select(ctx context.Context, ids []int64) ([]job.Node, error) {
	ns, _, err := n.f.SelectNodes(ctx, "", false, ids)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byID == nil {
		n.byID = map[int64]nodes.Node{}
		n.fleet = ns
	}
	out := make([]job.Node, len(ns))
	for i, nd := range ns {
		n.byID[nd.ID] = nd
		out[i] = job.Node{ID: nd.ID, Name: nd.Name, Rank: nd.Rank}
	}
	return out, nil
}

// nodes are the selected nodes under the names and ranks the job gives
// them, and the fleet their rank variables are of when one of them
// stands in another's place (nil when none does).
func (n *jobNodes) nodes(in []job.Node) ([]nodes.Node, []nodes.Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]nodes.Node, 0, len(in))
	var fleet []nodes.Node
	for _, j := range in {
		nd := n.byID[j.ID]
		if j.Name != nd.Name || j.Rank != nd.Rank {
			fleet = n.fleet
		}
		nd.Name, nd.Rank = j.Name, j.Rank
		out = append(out, nd)
	}
	return out, fleet
}

// picked are the selected nodes under the names and ranks the job gives
// them.
func (n *jobNodes) picked(in []job.Node) []nodes.Node {
	out, _ := n.nodes(in)
	return out
}

func (n *jobNodes) Sync(ctx context.Context, sel []job.Node, src, dest string) (int, []job.StepResult, error) {
	files, err := remote.ScanTree(src, SyncExcludes(), nil)
	if err != nil {
		return 0, nil, usage.Errorf("workdir %s: %v", src, err)
	}
	rows, err := n.f.SyncNodes(ctx, n.p, n.picked(sel), src, files, dest, 64, 3, false)
	out := make([]job.StepResult, len(rows))
	for i, r := range rows {
		out[i] = job.StepResult{ID: r.ID, Node: r.Node, Error: r.Error, Bytes: r.WireBytes}
	}
	return len(files), out, err
}

func (n *jobNodes) Exec(ctx context.Context, sel []job.Node, script, logDir string) ([]job.StepResult, error) {
	ns, fleet := n.nodes(sel)
	o, err := n.f.NodeOps(n.p, 64)
	if err != nil {
		return nil, err
	}
	rows, err := o.Exec(ctx, ns, nodes.ExecOptions{Command: script, Parallel: 64, OutDir: logDir, Quiet: true, Fleet: fleet})
	out := make([]job.StepResult, len(rows))
	for i, r := range rows {
		out[i] = job.StepResult{ID: r.ID, Node: r.Node, LogFile: r.OutputFile}
		if r.Error != "" || r.ExitCode != 0 {
			out[i].Error = fmt.Sprintf("exit %d %s (log: %s)", r.ExitCode, r.Error, r.OutputFile)
		}
	}
	return out, err
}

func (n *jobNodes) Collect(ctx context.Context, sel []job.Node, remoteDir, localParent string) ([]job.StepResult, error) {
	rows, err := n.f.CollectNodes(ctx, n.p, n.picked(sel), remoteDir, localParent, 64)
	out := make([]job.StepResult, len(rows))
	for i, r := range rows {
		out[i] = job.StepResult{ID: r.ID, Node: r.Node, Error: r.Error, Files: r.Fetched}
	}
	return out, err
}

// JobLauncher rents a job's fleet with the launch engine (job.Launcher).
// The command gives what is its own: the offers to launch from and the
// view a launch's progress is shown on.
type JobLauncher struct {
	F    *Factory
	M    *fleet.Manager
	Spec launch.Spec
	ID   string
	// Offers are the offers to launch from, best first, for spec (up's
	// search or plan), with what the plan accepted.
	Offers func(ctx context.Context, spec *launch.Spec) ([]market.Ranked, job.Estimate, *launch.Accepted, error)
	// View opens the launch's view: its events, and its end.
	View    func() (event func(launch.Event), stop func())
	running sync.Once
}

func (l *JobLauncher) Candidates(ctx context.Context) ([]market.Ranked, job.Estimate, error) {
	cands, est, acc, err := l.Offers(ctx, &l.Spec)
	l.Spec.Accepted = acc
	return cands, est, err
}
func (l *JobLauncher) Launch(ctx context.Context, cands []market.Ranked) (launch.Summary, error) {
	event, stop := l.View()
	defer stop()
	return launch.Run(ctx, l.M, l.Spec, cands, event)
}

func (l *JobLauncher) Resume(ctx context.Context) (launch.Summary, error) {
	event, stop := l.View()
	defer stop()
	return launch.Resume(ctx, l.M, l.ID, event, l.Spec.Checks)
}

// Grow rents a running job's replacements quietly: the job's own live
// view is on the terminal, and the job reports each outcome.
func (l *JobLauncher) Grow(ctx context.Context, add int, accept func(market.Ranked) bool) (launch.Summary, error) {
	return launch.Grow(ctx, l.M, l.ID, add, nil, l.Spec.Checks, accept)
}

func (l *JobLauncher) GrowOffers(ctx context.Context) (launch.Offers, error) {
	return launch.GrowOffers(ctx, l.M, l.ID)
}

func (l *JobLauncher) Running() { l.running.Do(l.F.keepMarketMoving) }

func (l *JobLauncher) RunStarted() { l.F.steadyMarket() }

// CoordDB opens the data dir's coordinator database (findings, items),
// for a job whose coordinator no longer runs.
func (f *Factory) CoordDB(ctx context.Context) (*coord.DB, error) {
	dir, err := f.DataDir()
	if err != nil {
		return nil, err
	}
	return coord.OpenDB(ctx, filepath.Join(dir, "coord.db"))
}

// ExistingCoordDB opens the data dir's coordinator database when a
// coordinator ever ran here; nil (and no error) when none did, so that a
// command that only reads creates nothing.
func (f *Factory) ExistingCoordDB(ctx context.Context) (*coord.DB, error) {
	dir, err := f.DataDir()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "coord.db")); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return f.CoordDB(ctx)
}

// ViewClock is the market's now for a command that only reads the store:
// wall time on vast.ai, the simulator's as remoteclock.Viewing says.
func (f *Factory) ViewClock(ctx context.Context, st *store.Store) clock.Clock {
	if f.Opts.Market != "sim" {
		return clock.Wall{}
	}
	url := f.Opts.APIURL
	if url == "" {
		url, _ = f.servedSim()
	}
	return remoteclock.Viewing(ctx, url, func() (time.Time, error) { return st.LastListed(ctx) })
}

// StatusDeps are what `status` reads jobs with: their records, a manager
// that counts spend to the market's now (on the simulator the market's
// own clock, which runs ahead of this machine's), and the coordinator's
// last heartbeats, which give what each job delivers per dollar (a data
// dir that never ran one has no database to read). done closes it.
func (f *Factory) StatusDeps(ctx context.Context) (d *job.Deps, recs *job.Records, done func(), err error) {
	if recs, err = f.JobRecords(ctx); err != nil {
		return nil, nil, nil, err
	}
	m := &fleet.Manager{S: recs.Store, Clock: f.ViewClock(ctx, recs.Store), Log: f.Log}
	d = &job.Deps{Store: recs.Store, Fleet: m}
	db, err := f.ExistingCoordDB(ctx)
	if err != nil || db == nil {
		return d, recs, func() {}, err
	}
	d.Results = db
	return d, recs, func() { db.Close() }, nil
}

// DownDeps are what `down` ends a job with once its up is found gone: the
// writer's manager (the data dir's lock, held as "vastfleet down ID"),
// reconciled with the market first, the job records as they then are,
// the coordinator's database (it holds the findings and item results an
// up cut off never wrote out), the nodes; events get the job's events.
// done closes the database.
func (f *Factory) DownDeps(ctx context.Context, id string, events func(job.Event)) (d *job.Deps, done func(), err error) {
	m, err := f.Manager(ctx, HolderName("down", id))
	if err != nil {
		return nil, nil, err
	}
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return nil, nil, fmt.Errorf("reconcile before down: %w", err)
	}
	recs, err := f.JobRecords(ctx)
	if err != nil {
		return nil, nil, err
	}
	db, err := f.CoordDB(ctx)
	if err != nil {
		return nil, nil, err
	}
	return &job.Deps{Provider: m.P, Store: m.S, Fleet: m, Clock: f.Clock(), Results: db,
		Nodes: f.JobNodes(m.P), Records: recs, Events: events}, func() { db.Close() }, nil
}

// JobLogs are the session logs of the nodes that ran the job (job.Logs),
// a node out of reach giving its container log.
func (f *Factory) JobLogs(ctx context.Context, rec *job.Record, o job.LogsOptions) ([]job.NodeLog, error) {
	op, err := f.Operator(ctx)
	if err != nil {
		return nil, err
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, err
	}
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return nil, err
	}
	o.Container = op.InstanceLogs
	return job.Logs(ctx, &job.Deps{Provider: p, Store: st, Nodes: f.JobNodes(p)}, rec, o)
}
