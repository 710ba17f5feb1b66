package cli

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Ctrl+C choices of `up`.
const (
	upKeep    = job.Keep
	upCollect = job.Collect
	upDestroy = job.Destroy
)

type upOptions struct {
	// File is the task file (default vastfleet.yaml).
	File        string
	AgentBin    string
	CoordAddr   string
	ResultsDir  string
	OnInterrupt string
	JSONFlags
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
	// coordAddrGiven and marketGiven say the user typed them: a resumed
	// job keeps its coordinator's address, and a task file's market
	// applies, unless they did.
	coordAddrGiven, marketGiven bool
}

func newUpCmd(f *factory, runF func(context.Context, *upOptions) error) *cobra.Command {
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
			opts.marketGiven = cmd.Flags().Changed("market")
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return upCmdRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.ResultsDir, "results", "results", "local directory: results land in RESULTS/<job>/<node>/")
	fl.StringVar(&opts.CoordAddr, "coord-addr", "127.0.0.1:0", "where the job's coordinator listens (instances on vast.ai need a public address; it then serves TLS)")
	fl.StringVar(&opts.AgentBin, "agent-bin", "", "agent binary to serve to instances (default: vastfleet-agent beside this binary, else built from the module source, else this binary)")
	fl.StringVar(&opts.OnInterrupt, "on-interrupt", "", "on Ctrl+C: keep, collect (then destroy) or destroy (default: ask on a terminal, else collect)")
	addJSONFlags(fl, &opts.JSONFlags, "print the cost report as JSON")
	fl.BoolVar(&opts.Detach, "detach", false, "run the job in a background up (output in the data dir's jobs/<job>/up.log) and return once it runs; status, logs and down JOB work from any terminal")
	fl.StringVar(&opts.JobID, "job-id", "", "the job's name (default: the task's name and the time)")
	fl.MarkHidden("job-id")
	fl.StringVar(&opts.Resume, "resume", "", "continue JOB after its up ended without finishing (crash, kill -9): the coordinator comes back on its address, the run is watched to its end, then collect, destroy, report")
	return cmd
}

// upCmdRun is `up` once its flags are parsed: a fresh job from its task
// file, a resumed one, or a detached one.
func upCmdRun(ctx context.Context, f *factory, opts *upOptions) error {
	path := opts.File
	if opts.Resume != "" {
		rec, err := loadJob(ctx, f, opts.Resume)
		if err != nil {
			return err
		}
		if rec.State == job.StateDone {
			return usagef("job %s is done (`vastfleet status %s`; its report: `vastfleet down %s`)", rec.ID, rec.ID, rec.ID)
		}
		path, opts.JobID, opts.resumed = rec.File, rec.ID, rec
		if rec.CoordAddr != "" && !opts.coordAddrGiven {
			// The agents know the coordinator by this address.
			opts.CoordAddr = rec.CoordAddr
		}
	}
	jf, err := jobfile.Load(path)
	if err != nil {
		return usageError{err}
	}
	if jf.Market != "" && !opts.marketGiven {
		f.opts.Market = jf.Market
	}
	if opts.Detach {
		return detachUp(ctx, f, opts, jf)
	}
	rep, err := upRun(ctx, f, opts, jf, path)
	if rep != nil && opts.JSON {
		if jerr := writeJSON(opts.out(f.io.Out), rep); jerr != nil && err == nil {
			err = jerr
		}
	}
	return err
}

// jobID names a job (and its fleet) after the file's name and the time.
func jobID(name string) string {
	if name == "" {
		name = "job"
	}
	return name + "-" + time.Now().UTC().Format("20060102-150405")
}

// upRun wires a job's dependencies (coordinator, market, store, nodes),
// runs it and prints its report.
func upRun(ctx context.Context, f *factory, opts *upOptions, jf *jobfile.Job, path string) (*job.Report, error) {
	loopback, err := checkUpFlags(f, opts)
	if err != nil {
		return nil, err
	}
	if err := job.Check(jf, scanWorkdir); err != nil {
		return nil, usageError{err}
	}
	if f.opts.Market == "sim" && f.opts.APIURL == "" {
		// The launch waits on the virtual clock, paced at the market's
		// speed: its own work costs no market time however busy this
		// machine is, and the agents' wall-scaled timers keep in step.
		f.waitsOnMarket, f.simSpeedSet = true, true
	}
	orphanAfter := cmp.Or(jf.OrphanAfter, wire.DefaultOrphanAft)
	interval := 10 * time.Second
	if f.opts.Market == "sim" {
		// Simulated nodes all run on this machine: a heartbeat a market
		// minute keeps fifty agents from crowding its cores.
		interval = time.Minute
	}
	c, err := startCoord(ctx, f, &coordOptions{Addr: opts.CoordAddr, TLS: !loopback, AgentBin: opts.AgentBin,
		OrphanAfter: orphanAfter, OrphanPolicy: wire.PolicyStop, Interval: interval, DepthQuery: depthQuery(jf)})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	id := cmp.Or(opts.JobID, jobID(jf.Name))
	release, err := lockJobRun(f, id)
	if err != nil {
		return nil, err
	}
	defer release()
	d, o, err := upDeps(ctx, f, opts, c, jf, path, id, orphanAfter)
	if err != nil {
		return nil, err
	}
	// As long as the coordinator takes to call a silent node dead.
	d.LostAfter = 10 * interval
	view := newJobView(f, opts.JSON)
	defer view.close()
	d.Events = view.event
	rep, err := job.Up(ctx, d, o)
	view.close()
	if rep != nil && !opts.JSON {
		printJobReport(f, rep)
	}
	return rep, err
}

// checkUpFlags checks what can be wrong in up's flags, and says whether
// the coordinator listens on loopback.
func checkUpFlags(f *factory, opts *upOptions) (bool, error) {
	switch opts.OnInterrupt {
	case "", upKeep, upCollect, upDestroy:
	default:
		return false, usagef("--on-interrupt %q: use keep, collect or destroy", opts.OnInterrupt)
	}
	host, _, err := net.SplitHostPort(opts.CoordAddr)
	if err != nil {
		return false, usagef("--coord-addr %q: want HOST:PORT", opts.CoordAddr)
	}
	loopback := host == "localhost" || net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback()
	if f.opts.Market == "vast" && loopback {
		return false, usagef("instances on vast.ai cannot reach a coordinator on %s: run up on a machine with a public address and pass --coord-addr 0.0.0.0:8470", opts.CoordAddr)
	}
	return loopback, nil
}

// upDeps builds the job's dependencies: the launch spec with the agent,
// the market's lifecycle manager (reconciled), the nodes, the records.
func upDeps(ctx context.Context, f *factory, opts *upOptions, c *coord.Running, jf *jobfile.Job, path, id string, orphanAfter time.Duration) (*job.Deps, job.Options, error) {
	lo := &launchOptions{
		Count: jf.Count, MinReady: jf.MinReady, Deadline: cmp.Or(jf.Deadline, 10*time.Minute), Park: jf.Park, Backfill: true,
		MaxDPH: jf.MaxDPH, Budget: jf.Budget, BudgetSet: jf.Budget > 0, ImageGB: jf.ImageGB,
		Image: jf.Image, Disk: cmp.Or(jf.Disk, 20), Fleet: id, Coord: "auto", Items: jf.Items, OnShortHardware: jf.OnShortHardware,
		OrphanAfter: orphanAfter, OrphanPolicy: wire.PolicyStop,
		Ladder:      fleet.Ladder{MaxLifetime: jf.MaxLifetime, IdleAfter: jf.IdleAfter, IdleBelow: jf.IdleBelow, StoppedFor: jf.StoppedFor},
		BootTimeout: launch.DefaultBootTimeout, ReleaseTimeout: launch.DefaultReleaseTimeout, BadHostTTL: launch.DefaultBadHostTTL,
	}
	spec, err := lo.spec(launch.InterruptKeep)
	if err != nil {
		return nil, job.Options{}, err
	}
	for k, v := range jf.Env {
		spec.Create.Env[k] = v
	}
	for _, p := range jf.Ports {
		spec.Create.Env[fmt.Sprintf("-p %d:%d", p, p)] = "1" // vast's way of opening a port
	}
	wd := f.workdirOnNode()
	spec.Sessions = job.Sessions(jf, wd)
	if err := c.DB.SetValidation(ctx, id, job.CoordValidation(jf.Validate)); err != nil {
		return nil, job.Options{}, err
	}
	if err := f.withAgent(ctx, &spec, lo); err != nil {
		return nil, job.Options{}, err
	}
	if spec.Checks, err = f.launchChecks(ctx, lo, id); err != nil {
		return nil, job.Options{}, err
	}
	if jf.Park && jf.OnShortHardware == "" {
		// A parked job's nodes are probed at their first boot and then
		// stopped until the release; judging them there holds the park
		// up, and the job's watch would count their silence. Their probes
		// are reported (dashboard); on_short_hardware turns judging on.
		spec.Hardware = nil
	}
	m, err := f.manager(ctx, holderName("up", path))
	if err != nil {
		return nil, job.Options{}, err
	}
	if err := beforeRenting(ctx, m, id, lo.Ladder); err != nil {
		return nil, job.Options{}, err
	}
	recs, err := f.jobRecords(ctx)
	if err != nil {
		return nil, job.Options{}, err
	}
	_, viewer, err := c.DB.FleetTokens(ctx, id)
	if err != nil {
		return nil, job.Options{}, err
	}
	o := job.Options{Job: jf, File: path, ID: id, ResultsDir: opts.ResultsDir, Resumed: opts.resumed,
		Dashboard: coord.DashboardURL(c.URL, viewer), ScanWorkdir: scanWorkdir}
	if host, _, err := net.SplitHostPort(opts.CoordAddr); err == nil {
		if _, port, err := net.SplitHostPort(c.Addr.String()); err == nil {
			o.CoordAddr = net.JoinHostPort(host, port)
		}
	}
	d := &job.Deps{Provider: m.P, Store: m.S, Fleet: m, Clock: f.Clock(), Coord: c.Srv, Results: c.DB,
		Nodes: &jobNodes{f: f, p: m.P}, Records: recs, Poll: opts.poll, WorkdirOnNode: wd,
		Launcher: &jobLauncher{f: f, m: m, spec: spec, jf: jf, id: id},
		Choose:   func() string { return askUpChoice(f, opts) }}
	return d, o, nil
}

// askUpChoice is what to do after Ctrl+C: the flag, the answer on a
// terminal, else collect and destroy.
func askUpChoice(f *factory, opts *upOptions) string {
	if opts.OnInterrupt != "" {
		return opts.OnInterrupt
	}
	if !f.io.InTTY {
		return upCollect
	}
	fmt.Fprintf(f.io.ErrOut, "\nJob interrupted. [k]eep the nodes running, [c]ollect results and destroy, [d]estroy now? [k/c/d] ")
	var answer string
	fmt.Fscanln(f.io.In, &answer)
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "k", "keep":
		return upKeep
	case "d", "destroy":
		return upDestroy
	}
	return upCollect
}

// upCandidates are the offers to launch from, best first, and for a
// planned job the planner's estimate of the picked option.
func upCandidates(ctx context.Context, f *factory, jf *jobfile.Job) ([]market.Ranked, job.Estimate, *launch.Accepted, error) {
	if !jf.Planned() {
		qf := &queryFlags{Type: "on-demand", Order: "score-", Storage: cmp.Or(jf.Disk, 20), SweepLimit: 1000}
		rf := &rankFlags{By: jf.By}
		ranked, _, err := rankedOffers(ctx, f, qf, rf, []string{jf.Query}, qf.SweepLimit)
		return ranked, job.Estimate{}, nil, err
	}
	req, err := plan.Requirements(*jf.Task)
	if err != nil {
		return nil, job.Estimate{}, nil, usageError{err}
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, job.Estimate{}, nil, err
	}
	offers, err := searchTiers(ctx, f, req, p.SearchOffers)
	if err != nil {
		return nil, job.Estimate{}, nil, err
	}
	res, err := plan.Options(*jf.Task, req, offers)
	if err != nil {
		return nil, job.Estimate{}, nil, fmt.Errorf("%w; nothing was rented", err)
	}
	printPlan(f.io.ErrOut, req, res, false)
	if res.OverBudget {
		return nil, job.Estimate{}, nil, usagef("every option costs more than max_budget $%.2f: nothing rented (raise it, shorten the task or quantize)", jf.Task.MaxBudget)
	}
	pick := job.PickOption(res.Options, jf.Option)
	if jf.Option == "" && f.io.InTTY && f.io.ErrTTY {
		if k := askPick(f.io, len(res.Options)); k > 0 {
			pick = k - 1
		}
	}
	o := res.Options[pick]
	fmt.Fprintf(f.io.ErrOut, "renting option %d (%s): %dx %s at $%.3f/hr (offer %d), estimated %.2f h, %s\n", o.Rank, o.Label, o.NumGPUs, o.GPUName, o.DPHTotal, o.OfferID, o.EstHours, money(o.EstTotal))
	cands, est, acc := job.PlannedOffers(*jf.Task, req, res.Options, pick, offers)
	return cands, est, acc, nil
}

// depthQuery is the dashboard's market-depth plot for a search job: its
// own query.
func depthQuery(jf *jobfile.Job) string {
	if jf.Planned() {
		return ""
	}
	return jf.Query
}
