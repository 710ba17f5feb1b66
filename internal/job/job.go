// Package job runs a job from its task file, from renting to the cost
// report: plan or search, launch, prepare (sync, setup), start the
// sessions, watch, finish (items done, run exited everywhere, max_duration
// or the user's interrupt and choice), collect, destroy and report; and it
// resumes, and ends from another terminal (down), a job whose up was cut
// off. It takes what it acts on as one Deps and tells what happens as
// typed events: the command line only parses flags, calls it and prints.
//
// A job's record has one home, the store (jobs/<job>/job.json is an export
// of it), and every write of it is checked.
package job

import (
	"context"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/usage"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Where a job's files live on a node. The run session waits for GoMarker,
// which the job writes (with the node's rank variables) once the workdir is
// synced and setup has run on every node.
const (
	RemoteWorkdir = "/workspace/project"
	GoMarker      = ".vastfleet-go"
	RunSession    = "run"
)

// What to do with the nodes after an interrupt.
const (
	Keep    = "keep"
	Collect = "collect"
	Destroy = "destroy"
)

// ErrPartial marks a job that did part of what was asked: items left with
// every node lost, a step or the run failed on some nodes, results not
// collected from some. The command line exits 3 for it.
var ErrPartial = usage.ErrPartial

// partial wraps err as ErrPartial.
func partial(err error) error { return usage.Partial{Err: err} }

// Node is one node of the job, as the node operations name it: its name
// and rank are its place in the fleet (a replacement takes the culled
// node's).
type Node struct {
	ID   int64
	Name string
	Rank int
}

// StepResult is one node's outcome of a step (sync, setup, start,
// collect): Error is empty when it succeeded.
type StepResult struct {
	ID      int64
	Node    string
	Error   string
	Files   int   // collect: files fetched
	Bytes   int64 // sync: bytes sent
	LogFile string
}

// Nodes are the operations the job runs over a set of nodes, over SSH.
type Nodes interface {
	// Select gives the nodes of these instances, ranked in id order;
	// every one must be running with an SSH route.
	Select(ctx context.Context, ids []int64) ([]Node, error)
	// Sync sends the local directory src to dest on every node; files
	// is how many files the tree has.
	Sync(ctx context.Context, nodes []Node, src, dest string) (files int, rows []StepResult, err error)
	// Exec runs script on every node, each node's output in logDir.
	Exec(ctx context.Context, nodes []Node, script, logDir string) ([]StepResult, error)
	// Collect copies remoteDir of every node into localParent/<node>.
	Collect(ctx context.Context, nodes []Node, remoteDir, localParent string) ([]StepResult, error)
}

// Results is what the coordinator's database holds of a job: findings and
// work items. *coord.DB is one.
type Results interface {
	CountFindings(ctx context.Context, fleet string) (int64, error)
	Findings(ctx context.Context, fleet string, limit int) ([]wire.Finding, error)
	ItemResults(ctx context.Context, fleet string) ([]coord.ItemResult, error)
	ItemCounts(ctx context.Context, fleet string) (queued, leased, done int, err error)
	LastMetrics(ctx context.Context, fleet string) (map[int64]coord.Reported, error)
}

// Watcher is the live coordinator: the fleet's view at this moment.
type Watcher interface {
	Snapshot(ctx context.Context, fleet string) wire.Snapshot
}

// Launcher rents the fleet: the offers to launch from (plan or search),
// then the launch itself, or its resumption.
type Launcher interface {
	Candidates(ctx context.Context) ([]market.Ranked, Estimate, error)
	Launch(ctx context.Context, cands []market.Ranked) (launch.Summary, error)
	Resume(ctx context.Context) (launch.Summary, error)
	// Grow rents add more nodes into the job's fleet once it runs (the
	// cull policy's replacements): the launch's offers and readiness
	// gates; what is not ready by its end is destroyed. ReadyIDs are the
	// new nodes.
	// accept, when not nil, leaves out the offers it refuses.
	Grow(ctx context.Context, add int, accept func(market.Ranked) bool) (launch.Summary, error)
	// GrowOffers are the offers a Grow would rent from now, in its
	// order, and those the fleet was rented from.
	GrowOffers(ctx context.Context) (launch.Offers, error)
	// Running is called once the launch is over: the market runs on by
	// itself from then on (the simulator's virtual clock).
	Running()
	// RunStarted is called when the job's run starts on its nodes (their
	// go marker written): under the simulator's capacity model the
	// market then moves steadily, as the machines' processes take wall
	// time.
	RunStarted()
}

// Estimate is what the job was expected to cost, and of what.
type Estimate struct {
	Total float64
	Of    string
}

// Deps is everything a job acts on.
type Deps struct {
	Provider provider.Provider
	Store    *store.Store
	// Fleet is the lifecycle over Provider and Store: reconcile,
	// destroy, cost.
	Fleet *fleet.Manager
	Clock clock.Clock
	// Coord watches the run; nil when no coordinator runs (down).
	Coord Watcher
	// Results is the coordinator's database; nil when there is none.
	Results  Results
	Nodes    Nodes
	Launcher Launcher
	// Events receives what happens, in order; nil drops them.
	Events func(Event)
	// Choose is asked what to do after an interrupt (Keep, Collect or
	// Destroy); nil means Collect.
	Choose func() string
	// Records keeps job records (the store, with job.json exported).
	Records *Records
	// Poll is how often the run is checked (wall time; default 250ms).
	Poll time.Duration
	// LostAfter is how long into the run a node whose agent was never
	// heard from counts as lost, as one that stopped reporting does (0:
	// never).
	LostAfter time.Duration
	// WorkdirOnNode is where the workdir lands on a node (RemoteWorkdir,
	// or its sandboxed form on the simulator).
	WorkdirOnNode string
}

func (d *Deps) emit(e Event) {
	if d.Events != nil {
		d.Events(e)
	}
}

// choice is what to do with the nodes now: Collect unless ctx was
// interrupted, then what the user chooses.
func (d *Deps) choice(ctx context.Context) string {
	if ctx.Err() == nil || d.Choose == nil {
		return Collect
	}
	return d.Choose()
}
