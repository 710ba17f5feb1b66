package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/clock/remoteclock"
	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/ignore"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/nodes"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/store"
)

// The job package's types under the names this package's commands and
// tests use.
type (
	jobReport = job.Report
	jobNode   = job.ReportNode
	itemLine  = job.ItemLine
	nodeLog   = job.NodeLog
	jobStatus = job.Status
)

// jobRecords are the data dir's job records (in the store, exported to
// jobs/<job>/job.json).
func (f *factory) jobRecords(ctx context.Context) (*job.Records, error) {
	dir, err := f.jobsDir()
	if err != nil {
		return nil, err
	}
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return nil, err
	}
	return &job.Records{Store: st, Dir: dir}, nil
}

// jobsDir is the data dir's jobs/: a directory per job (logs, lock,
// exports).
func (f *factory) jobsDir() (string, error) {
	dir, err := f.dataDir()
	return filepath.Join(dir, "jobs"), err
}

// loadJob is a job's record; an unknown job is the user's mistake.
func loadJob(ctx context.Context, f *factory, id string) (*job.Record, error) {
	recs, err := f.jobRecords(ctx)
	if err != nil {
		return nil, err
	}
	rec, err := recs.Load(ctx, id)
	if errors.Is(err, job.ErrNotFound) {
		return nil, usageError{err}
	}
	return rec, err
}

// syncExcludes are what a job's workdir sync leaves out by default.
func syncExcludes() []ignore.Rule {
	return ignore.Parse("", strings.Join(nodes.DefaultExcludes, "\n"))
}

// scanWorkdir reads a job's workdir as its sync will, every file hashed.
func scanWorkdir(dir string) error {
	_, err := remote.ScanTree(dir, syncExcludes(), nil)
	return err
}

// workdirOnNode is where a job's workdir lands on a node (inside the
// simulated machine's sandbox on the simulator).
func (f *factory) workdirOnNode() string {
	if f.opts.Market == "sim" {
		return nodes.SimRelative(job.RemoteWorkdir)
	}
	return job.RemoteWorkdir
}

// jobNodes are the job's node operations over SSH: exec, sync and collect
// as the commands of those names run them.
type jobNodes struct {
	f *factory
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
	args := make([]string, len(ids))
	for i, id := range ids {
		args[i] = strconv.FormatInt(id, 10)
	}
	ns, _, err := n.f.selectNodes(ctx, "", false, args, true)
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
	files, err := remote.ScanTree(src, syncExcludes(), nil)
	if err != nil {
		return 0, nil, usagef("workdir %s: %v", src, err)
	}
	rows, err := syncNodes(ctx, n.f, n.p, n.picked(sel), src, files, dest, 64, 3, false)
	out := make([]job.StepResult, len(rows))
	for i, r := range rows {
		out[i] = job.StepResult{ID: r.ID, Node: r.Node, Error: r.Error, Bytes: r.WireBytes}
	}
	return len(files), out, err
}

func (n *jobNodes) Exec(ctx context.Context, sel []job.Node, script, logDir string) ([]job.StepResult, error) {
	ns, fleet := n.nodes(sel)
	o, err := n.f.nodeOps(n.p, 64)
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
	rows, err := collectNodes(ctx, n.f, n.p, n.picked(sel), remoteDir, localParent, 64)
	out := make([]job.StepResult, len(rows))
	for i, r := range rows {
		out[i] = job.StepResult{ID: r.ID, Node: r.Node, Error: r.Error, Files: r.Fetched}
	}
	return out, err
}

// jobLauncher rents a job's fleet with the launch engine, its progress on
// the launch's own view.
type jobLauncher struct {
	f       *factory
	m       *fleet.Manager
	spec    launch.Spec
	jf      *jobfile.Job
	id      string
	running sync.Once
}

func (l *jobLauncher) Candidates(ctx context.Context) ([]market.Ranked, job.Estimate, error) {
	cands, est, acc, err := upCandidates(ctx, l.f, l.jf, &l.spec)
	l.spec.Accepted = acc
	return cands, est, err
}

func (l *jobLauncher) Launch(ctx context.Context, cands []market.Ranked) (launch.Summary, error) {
	view := newLaunchView(l.f, cmdutil.JSONFlags{})
	defer view.stop()
	return launch.Run(ctx, l.m, l.spec, cands, view.event)
}

func (l *jobLauncher) Resume(ctx context.Context) (launch.Summary, error) {
	view := newLaunchView(l.f, cmdutil.JSONFlags{})
	defer view.stop()
	return launch.Resume(ctx, l.m, l.id, view.event, l.spec.Checks)
}

// Grow rents a running job's replacements quietly: the job's own live
// view is on the terminal, and the job reports each outcome.
func (l *jobLauncher) Grow(ctx context.Context, add int) (launch.Summary, error) {
	return launch.Grow(ctx, l.m, l.id, add, nil, l.spec.Checks)
}

func (l *jobLauncher) Running() { l.running.Do(l.f.keepMarketMoving) }

// coordDB opens the data dir's coordinator database (findings, items),
// for a job whose coordinator no longer runs.
func (f *factory) coordDB(ctx context.Context) (*coord.DB, error) {
	dir, err := f.dataDir()
	if err != nil {
		return nil, err
	}
	return coord.OpenDB(ctx, filepath.Join(dir, "coord.db"))
}

// existingCoordDB opens the data dir's coordinator database when a
// coordinator ever ran here; nil (and no error) when none did, so that a
// command that only reads creates nothing.
func (f *factory) existingCoordDB(ctx context.Context) (*coord.DB, error) {
	dir, err := f.dataDir()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "coord.db")); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return f.coordDB(ctx)
}

// viewClock is the market's now for a command that only reads the store:
// wall time on vast.ai, the simulator's as remoteclock.Viewing says.
func (f *factory) viewClock(ctx context.Context, st *store.Store) clock.Clock {
	if f.opts.Market != "sim" {
		return clock.Wall{}
	}
	url := f.opts.APIURL
	if url == "" {
		url, _ = f.servedSim()
	}
	return remoteclock.Viewing(ctx, url, func() (time.Time, error) { return st.LastListed(ctx) })
}
