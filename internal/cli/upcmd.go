package cli

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/wire"
)

type upOptions struct {
	// File is the task file (default vastfleet.yaml).
	File        string
	AgentBin    string
	CoordAddr   string
	ResultsDir  string
	OnInterrupt string
	cmdutil.JSONFlags
	Detach bool
	// JobID names the job instead of name-time: the background up that
	// --detach starts runs the job its parent named.
	JobID string
	// Resume is the job to continue after its up ended without finishing
	// (a crash, kill -9, a lost machine); resumed is its record.
	Resume  string
	resumed *job.Record
	// poll is how often the run is checked (wall time).
	poll time.Duration
	// coordAddrGiven says the user typed --coord-addr: a resumed job
	// keeps its coordinator's address unless they did.
	coordAddrGiven bool
}

func newUpCmd(f *factory.Factory, runF func(context.Context, *upOptions) error) *cobra.Command {
	opts := &upOptions{poll: 250 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "up [FILE]",
		Short: "Run a whole job from a task file: rent, set up, sync, run, watch, collect, destroy, cost report",
		Long: `Read the task file (default ` + jobfile.DefaultName + `), then: plan (task:) or search
(query:), launch with the agent on every node and a coordinator in this
process, sync workdir to ` + job.RemoteWorkdir + `, run setup on every node,
start run (and sessions), print the dashboard link and a live summary,
and finish when run has exited on every node (with items:, when every item
is done: the coordinator leases them to the nodes, {item} in run is the
item's value), max_duration has passed or Ctrl+C (which asks: keep the nodes, collect and destroy, destroy now).
Then results are collected into RESULTS/<job>/<node>/ with the findings in
RESULTS/<job>/findings.jsonl and each item's result in items.jsonl, the nodes destroyed (unless auto_destroy:
false) and the cost report printed: compute, storage, bandwidth and
failed-launch waste against the estimate.

The job's name is the fleet's: ` + "`vastfleet status`" + ` lists jobs and
` + "`vastfleet down JOB`" + ` collects, destroys and reports from any terminal.`,
		Example: `  vastfleet up                      # ./vastfleet.yaml
  vastfleet up examples/search-fleet.yaml --results out`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = jobfile.DefaultName
			if len(args) == 1 {
				opts.File = args[0]
			}
			if opts.Resume != "" && (len(args) == 1 || opts.Detach || opts.JobID != "") {
				return usagef("--resume JOB continues the job from its own task file: give no FILE, --detach or --job-id")
			}
			if opts.Detach && opts.JobID != "" {
				return usagef("--detach starts a new job; --job-id is for the background up it starts")
			}
			opts.coordAddrGiven = cmd.Flags().Changed("coord-addr")
			return run(cmd, f, opts, runF, upCmdRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.ResultsDir, "results", "results", "local directory: results land in RESULTS/<job>/<node>/")
	fl.StringVar(&opts.CoordAddr, "coord-addr", "127.0.0.1:0", "where the job's coordinator listens (instances on vast.ai need a public address; it then serves TLS)")
	fl.StringVar(&opts.AgentBin, "agent-bin", "", "agent binary to serve to instances (default: vastfleet-agent beside this binary, else built from the module source, else this binary)")
	fl.StringVar(&opts.OnInterrupt, "on-interrupt", "", "on Ctrl+C: keep, collect (then destroy) or destroy (default: ask on a terminal, else collect)")
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print the cost report as JSON")
	fl.BoolVar(&opts.Detach, "detach", false, "run the job in a background up (output in the data dir's jobs/<job>/up.log) and return once it runs; status, logs and down JOB work from any terminal")
	fl.StringVar(&opts.JobID, "job-id", "", "the job's name (default: the task's name and the time)")
	fl.MarkHidden("job-id")
	fl.StringVar(&opts.Resume, "resume", "", "continue JOB after its up ended without finishing (crash, kill -9): the coordinator comes back on its address, the run is watched to its end, then collect, destroy, report")
	return withNeeds(f, cmd, func(args []string) factory.Needs {
		n := upNeeds(nil)
		n.Market = f.TaskMarket(opts.Resume, strings.Join(args, " "))
		return n
	})
}

// upCmdRun is `up` once its flags are parsed: a fresh job from its task
// file, a resumed one, or a detached one.
func upCmdRun(ctx context.Context, f *factory.Factory, opts *upOptions) error {
	path := opts.File
	if opts.Resume != "" {
		rec, err := f.LoadJob(ctx, opts.Resume)
		if err != nil {
			return err
		}
		if path, opts.CoordAddr, err = job.Resuming(rec, opts.CoordAddr, opts.coordAddrGiven); err != nil {
			return err
		}
		opts.JobID, opts.resumed = rec.ID, rec
	}
	jf, err := jobfile.Load(path)
	if err != nil {
		return usageError{err}
	}
	if opts.Detach {
		return detachUp(ctx, f, opts, jf)
	}
	rep, err := upRun(ctx, f, opts, jf, path)
	if rep != nil && opts.JSON {
		if jerr := cmdutil.WriteJSON(opts.Out(f.IO.Out), rep); jerr != nil && err == nil {
			err = jerr
		}
	}
	return err
}

// upRun wires a job's dependencies (coordinator, market, store, nodes),
// runs it and prints its report.
// upNeeds: up's launch waits on the virtual clock, paced at the market's
// speed (its own work costs no market time however busy this machine is,
// and the agents' wall-scaled timers keep in step), and the simulated
// instances run while its coordinator runs. Both concern the simulator
// of this data dir only.
func upNeeds([]string) factory.Needs {
	return factory.Needs{SimHosts: true, WaitsOnMarket: true, Paced: true}
}

func upRun(ctx context.Context, f *factory.Factory, opts *upOptions, jf *jobfile.Job, path string) (*job.Report, error) {
	loopback, err := job.CheckUp(jf, opts.OnInterrupt, opts.CoordAddr, f.Opts.Market == "vast", factory.ScanWorkdir)
	if err != nil {
		return nil, err
	}
	orphanAfter := cmp.Or(jf.OrphanAfter, wire.DefaultOrphanAft)
	interval := job.HeartbeatInterval(f.Opts.Market == "sim")
	c, err := f.StartCoord(ctx, &factory.CoordOptions{Addr: opts.CoordAddr, TLS: !loopback, AgentBin: opts.AgentBin,
		OrphanAfter: orphanAfter, OrphanPolicy: wire.PolicyStop, Interval: interval, DepthQuery: job.DepthQuery(jf)})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	id := cmp.Or(opts.JobID, job.NewID(jf.Name))
	release, err := lockJobRun(f, id)
	if err != nil {
		return nil, err
	}
	defer release()
	d, o, err := f.UpDeps(ctx, factory.UpJob{Job: jf, File: path, ID: id, Coord: c, OrphanAfter: orphanAfter,
		ResultsDir: opts.ResultsDir, CoordAddr: opts.CoordAddr, Resumed: opts.resumed, Poll: opts.poll, OnInterrupt: opts.OnInterrupt,
		Offers: func(ctx context.Context, spec *launch.Spec) ([]market.Ranked, job.Estimate, *launch.Accepted, error) {
			return upCandidates(ctx, f, jf, spec)
		}})
	if err != nil {
		return nil, err
	}
	// As long as the coordinator takes to call a silent node dead.
	d.LostAfter = 10 * interval
	view := job.NewView(f.IO, opts.JSON)
	defer view.Close()
	d.Events = view.Event
	rep, err := job.Up(ctx, d, o)
	view.Close()
	if rep != nil && !opts.JSON {
		rep.WriteText(f.IO.Out)
	}
	return rep, err
}

// upCandidates are the offers to launch from, best first, and for a
// planned job the planner's estimate of the picked option. spec is the
// job's launch: `by: useful` scores each offer for its image and
// deadline, not the default launch's.
func upCandidates(ctx context.Context, f *factory.Factory, jf *jobfile.Job, spec *launch.Spec) ([]market.Ranked, job.Estimate, *launch.Accepted, error) {
	if !jf.Planned() {
		qf := &queryFlags{Type: "on-demand", Order: "score-", Storage: cmp.Or(jf.Disk, 20), SweepLimit: 1000}
		rf := &rankFlags{By: jf.By, spec: spec}
		ranked, _, err := rankedOffers(ctx, f, qf, rf, []string{jf.Query}, qf.SweepLimit)
		if err == nil && jf.Probe != nil {
			ranked, err = probedOffers(ctx, f, jf, ranked)
		}
		return ranked, job.Estimate{}, nil, err
	}
	var ask func(int) int
	if jf.Option == "" && f.IO.InTTY && f.IO.ErrTTY {
		ask = func(n int) int { return f.IO.Pick(n) }
	}
	return job.PlanOffers(ctx, jf, job.Planner{Out: f.IO.ErrOut, Ask: ask,
		Search: f.PlanSearch, Show: func(req plan.Req, res plan.Result) { plan.WriteText(f.IO.ErrOut, req, res, false) }})
}
