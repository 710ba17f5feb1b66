package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/ignore"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Where a job's files live on a node. The run session waits for goMarker,
// which `up` writes (with the node's rank variables) once the workdir is
// synced and setup has run on every node.
const (
	remoteWorkdir = "/workspace/project"
	goMarker      = ".vastfleet-go"
	runSession    = "run"
)

// Ctrl+C choices of `up`.
const (
	upKeep    = "keep"
	upCollect = "collect"
	upDestroy = "destroy"
)

type upOptions struct {
	// File is the task file (default vastfleet.yaml).
	File        string
	AgentBin    string
	CoordAddr   string
	ResultsDir  string
	OnInterrupt string
	JSON        bool
	Detach      bool
	// JobID names the job instead of name-time: the background up that
	// --detach starts runs the job its parent named.
	JobID string
	// Resume is the job to continue after its up ended without finishing
	// (a crash, kill -9, a lost machine); resumed is its record.
	Resume  string
	resumed *jobRecord
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
process, sync workdir to ` + remoteWorkdir + `, run setup on every node,
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
	fl.StringVar(&opts.AgentBin, "agent-bin", "", "agent binary to serve to instances (default: vastfleet-agent beside this binary, else this binary)")
	fl.StringVar(&opts.OnInterrupt, "on-interrupt", "", "on Ctrl+C: keep, collect (then destroy) or destroy (default: ask on a terminal, else collect)")
	fl.BoolVar(&opts.JSON, "json", false, "print the cost report as JSON")
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
		rec, err := loadJob(f, opts.Resume)
		if err != nil {
			return err
		}
		if rec.State == "done" {
			return usagef("job %s is done (`vastfleet status %s`; its report: `vastfleet down %s`)", rec.ID, rec.ID, rec.ID)
		}
		path, opts.JobID, opts.resumed = rec.File, rec.ID, rec
		if rec.CoordAddr != "" && !opts.coordAddrGiven {
			// The agents know the coordinator by this address.
			opts.CoordAddr = rec.CoordAddr
		}
	}
	job, err := jobfile.Load(path)
	if err != nil {
		return usageError{err}
	}
	if job.Market != "" && !opts.marketGiven {
		f.opts.Market = job.Market
	}
	if opts.Detach {
		return detachUp(ctx, f, opts, job)
	}
	rep, err := upRun(ctx, f, opts, job, path)
	if rep != nil && opts.JSON {
		if jerr := writeJSON(f.io.Out, rep); jerr != nil && err == nil {
			err = jerr
		}
	}
	return err
}

// jobRecord is what `status` and `down` know of a job, kept in the data
// dir's jobs/ beside its cost report.
type jobRecord struct {
	ID string `json:"id"` // the fleet's name
	// PID is the up process running the job; it holds jobs/<job>/up.lock
	// while it lives (see lockJobRun).
	PID         int       `json:"pid,omitempty"`
	File        string    `json:"file"`
	State       string    `json:"state"` // launching, running, kept, done
	StartedAt   time.Time `json:"started_at"`
	Results     string    `json:"results,omitempty"` // on the nodes
	LocalDir    string    `json:"local_results"`
	AutoDestroy bool      `json:"auto_destroy"`
	RunIDs      []int64   `json:"run_ids,omitempty"` // the instances that ran it
	Estimate    float64   `json:"estimate"`
	EstimateOf  string    `json:"estimate_of"`
	Dashboard   string    `json:"dashboard,omitempty"`
	// CoordAddr is where the job's coordinator listened: the agents have
	// its address, so a resumed up listens there again.
	CoordAddr string `json:"coord_addr,omitempty"`
	// Started: the go marker is on every node of RunIDs (the run began).
	Started bool `json:"started,omitempty"`
}

func jobDir(f *factory, id string) (string, error) {
	dir, err := f.dataDir()
	if err != nil {
		return "", err
	}
	d := filepath.Join(dir, "jobs", id)
	return d, os.MkdirAll(d, 0o700)
}

func saveJob(f *factory, rec *jobRecord) error {
	d, err := jobDir(f, rec.ID)
	if err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rec, "", "  ")
	return atomicfile.WriteFile(filepath.Join(d, "job.json"), b, 0o600)
}

func loadJob(f *factory, id string) (*jobRecord, error) {
	dir, err := f.dataDir()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "jobs", id, "job.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, usagef("job %q: not found (see `vastfleet status`)", id)
	}
	if err != nil {
		return nil, err
	}
	var rec jobRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return &rec, nil
}

// jobID names a job (and its fleet) after the file's name and the time.
func jobID(name string) string {
	if name == "" {
		name = "job"
	}
	return name + "-" + time.Now().UTC().Format("20060102-150405")
}

func upRun(ctx context.Context, f *factory, opts *upOptions, job *jobfile.Job, path string) (*jobReport, error) {
	switch opts.OnInterrupt {
	case "", upKeep, upCollect, upDestroy:
	default:
		return nil, usagef("--on-interrupt %q: use keep, collect or destroy", opts.OnInterrupt)
	}
	host, _, err := net.SplitHostPort(opts.CoordAddr)
	if err != nil {
		return nil, usagef("--coord-addr %q: want HOST:PORT", opts.CoordAddr)
	}
	loopback := host == "localhost" || net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback()
	if f.opts.Market == "vast" && loopback {
		return nil, usagef("instances on vast.ai cannot reach a coordinator on %s: run up on a machine with a public address and pass --coord-addr 0.0.0.0:8470", opts.CoordAddr)
	}
	if f.opts.Market == "sim" && f.opts.APIURL == "" {
		// The launch waits on the virtual clock, paced at the market's
		// speed: its own work costs no market time however busy this
		// machine is, and the agents' wall-scaled timers keep in step.
		f.waitsOnMarket, f.simSpeedSet = true, true
	}
	orphanAfter := job.OrphanAfter
	if orphanAfter == 0 {
		orphanAfter = wire.DefaultOrphanAft
	}
	interval := 10 * time.Second
	if f.opts.Market == "sim" {
		// Simulated nodes all run on this machine: a heartbeat a market
		// minute keeps fifty agents from crowding its cores.
		interval = time.Minute
	}
	c, err := startCoord(ctx, f, &coordOptions{Addr: opts.CoordAddr, TLS: !loopback, AgentBin: opts.AgentBin,
		OrphanAfter: orphanAfter, OrphanPolicy: wire.PolicyStop, Interval: interval, DepthQuery: depthQuery(job)})
	if err != nil {
		return nil, err
	}
	defer c.Close()

	id := opts.JobID
	if id == "" {
		id = jobID(job.Name)
	}
	release, err := lockJobRun(f, id)
	if err != nil {
		return nil, err
	}
	defer release()
	// A resumed job past its launch needs no offers (nor a plan pick).
	resumeRunning := opts.resumed != nil && (opts.resumed.State == "running" || opts.resumed.State == "kept")
	var cands []market.Ranked
	est, estOf := 0.0, ""
	if !resumeRunning {
		if cands, est, estOf, err = upCandidates(ctx, f, job); err != nil {
			return nil, err
		}
	}
	lo := &launchOptions{
		Count: job.Count, MinReady: job.MinReady, Deadline: job.Deadline, Park: job.Park, Backfill: true,
		MaxDPH: job.MaxDPH, Budget: job.Budget, BudgetSet: job.Budget > 0, ImageGB: job.ImageGB,
		Image: job.Image, Disk: job.Disk, Fleet: id, Coord: "auto", Items: job.Items,
		OrphanAfter: orphanAfter, OrphanPolicy: wire.PolicyStop,
		BootTimeout: launch.DefaultBootTimeout, ReleaseTimeout: launch.DefaultReleaseTimeout, BadHostTTL: launch.DefaultBadHostTTL,
	}
	if lo.Deadline == 0 {
		lo.Deadline = 10 * time.Minute
	}
	if lo.Disk == 0 {
		lo.Disk = 20
	}
	spec, err := lo.spec(launch.InterruptKeep)
	if err != nil {
		return nil, err
	}
	for k, v := range job.Env {
		spec.Create.Env[k] = v
	}
	for _, p := range job.Ports {
		spec.Create.Env[fmt.Sprintf("-p %d:%d", p, p)] = "1" // vast's way of opening a port
	}
	spec.Sessions = jobSessions(f, job)
	if err := f.withAgent(ctx, &spec, lo); err != nil {
		return nil, err
	}
	m, err := f.manager(ctx, holderName("up", path))
	if err != nil {
		return nil, err
	}
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return nil, fmt.Errorf("reconcile before launching: %w", err)
	}
	local := filepath.Join(opts.ResultsDir, id)
	rec := &jobRecord{ID: id, File: path, State: "launching", StartedAt: time.Now().UTC(), Results: job.Results,
		LocalDir: local, AutoDestroy: job.AutoDestroy}
	if opts.resumed != nil {
		rec = opts.resumed
	}
	rec.PID = os.Getpid()
	if host, _, err := net.SplitHostPort(opts.CoordAddr); err == nil {
		if _, port, err := net.SplitHostPort(c.addr.String()); err == nil {
			rec.CoordAddr = net.JoinHostPort(host, port)
		}
	}
	if err := saveJob(f, rec); err != nil {
		return nil, err
	}
	_, viewer, err := c.DB.FleetTokens(ctx, id)
	if err != nil {
		return nil, err
	}
	rec.Dashboard = coord.DashboardURL(c.URL, viewer)
	if err := saveJob(f, rec); err != nil {
		return nil, err
	}
	fmt.Fprintf(f.io.ErrOut, "job %s: dashboard %s\n", id, rec.Dashboard)
	resumeLaunch := false
	if opts.resumed != nil {
		switch rec.State {
		case "running", "kept":
			return resumeRun(ctx, f, m, c, opts, job, rec)
		default:
			// Cut off mid-launch: the launch itself resumes, within its
			// own deadline, keeping what it rented (the store knew each
			// rental before it was sent). Cut off before the launch was
			// recorded, nothing was rented: it starts afresh.
			if _, err := m.S.GetFleet(ctx, id); err == nil {
				fmt.Fprintf(f.io.ErrOut, "job %s: its launch was cut off; resuming it within its deadline\n", id)
				resumeLaunch = true
			}
			rec.State = "launching"
		}
	}

	view := newLaunchView(f, false)
	var sum launch.Summary
	var lerr error
	if resumeLaunch {
		sum, lerr = launch.Resume(ctx, m, id, view.event)
	} else {
		sum, lerr = launch.Run(ctx, m, spec, cands, view.event)
	}
	f.keepMarketMoving()
	view.stop()
	if est == 0 {
		// The launch's own projection: every node at its $/hr for the run
		// (max_duration, else the launch horizon), plus the image pulls.
		if fl, err := m.S.GetFleet(ctx, id); err == nil {
			pulls := max(fl.EstCost-fl.EstDPH*fl.EstHours, 0)
			hours, of := fl.EstHours, "launch horizon"
			if job.MaxDuration > 0 {
				hours, of = job.MaxDuration.Hours(), "max_duration"
			}
			est = fl.EstDPH*hours + pulls
			estOf = fmt.Sprintf("%d nodes at $%.3f/hr for the %s (%.2f h) plus $%.2f of image pulls", job.Count, fl.EstDPH, of, hours, pulls)
		}
	}
	if est > 0 || rec.Estimate == 0 {
		rec.Estimate, rec.EstimateOf = est, estOf
	}
	if lerr == nil && len(sum.ReadyIDs) == 0 && !sum.Interrupted {
		lerr = fmt.Errorf("job %s: no node became ready", id)
	}
	if lerr != nil || sum.Interrupted {
		return finishJob(ctx, f, m, c, opts, job, rec, nil, interruptChoice(f, opts, ctx), lerr)
	}
	fmt.Fprintf(f.io.ErrOut, "job %s: %d of %d nodes ready at $%.3f/hr (%d rented, %d failed)\n", id, sum.Ready, sum.Asked, sum.DPHTotal, sum.Rented, sum.Failed)

	strIDs := make([]string, len(sum.ReadyIDs))
	for i, n := range sum.ReadyIDs {
		strIDs[i] = strconv.FormatInt(n, 10)
	}
	nodes, _, err := f.selectNodes(ctx, "", false, strIDs, true)
	if err != nil {
		return finishJob(ctx, f, m, c, opts, job, rec, nil, upCollect, err)
	}
	rec.State = "running"
	for _, n := range nodes {
		rec.RunIDs = append(rec.RunIDs, n.ID)
	}
	if err := saveJob(f, rec); err != nil {
		return nil, err
	}
	nodes, err = prepareNodes(ctx, f, job, id, nodes)
	if err != nil {
		return finishJob(ctx, f, m, c, opts, job, rec, nodes, interruptChoice(f, opts, ctx), err)
	}
	rec.RunIDs = rec.RunIDs[:0]
	for _, n := range nodes {
		rec.RunIDs = append(rec.RunIDs, n.ID)
	}
	rec.Started = true
	saveJob(f, rec)
	return watchAndFinish(ctx, f, m, c, opts, job, rec, nodes)
}

// resumeRun continues a job whose nodes were running its run when its up
// ended: the nodes that still run are watched to the end (their agents
// kept going, or come back to the coordinator at its old address), then
// the job finishes as usual.
func resumeRun(ctx context.Context, f *factory, m *fleet.Manager, c *runningCoord, opts *upOptions, job *jobfile.Job, rec *jobRecord) (*jobReport, error) {
	live, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: rec.ID})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range live {
		if r.State == "running" && slices.Contains(rec.RunIDs, r.ID) {
			ids = append(ids, strconv.FormatInt(r.ID, 10))
		}
	}
	if len(ids) == 0 {
		return finishJob(ctx, f, m, c, opts, job, rec, nil, upCollect, fmt.Errorf("job %s: none of its nodes still runs", rec.ID))
	}
	// The market moves on by itself, as after a launch.
	f.keepMarketMoving()
	nodes, _, err := f.selectNodes(ctx, "", false, ids, true)
	if err != nil {
		return finishJob(ctx, f, m, c, opts, job, rec, nil, upCollect, err)
	}
	rec.State = "running"
	if !rec.Started {
		// Cut off between the launch and the go marker: sync, setup and
		// start again (each step can run twice).
		if nodes, err = prepareNodes(ctx, f, job, rec.ID, nodes); err != nil {
			return finishJob(ctx, f, m, c, opts, job, rec, nodes, interruptChoice(f, opts, ctx), err)
		}
		rec.RunIDs = rec.RunIDs[:0]
		for _, n := range nodes {
			rec.RunIDs = append(rec.RunIDs, n.ID)
		}
		rec.Started = true
	}
	saveJob(f, rec)
	fmt.Fprintf(f.io.ErrOut, "job %s: resumed with %d of %d node(s) still running\n", rec.ID, len(nodes), len(rec.RunIDs))
	return watchAndFinish(ctx, f, m, c, opts, job, rec, nodes)
}

// watchAndFinish watches the run to its end, then collects, destroys and
// reports.
func watchAndFinish(ctx context.Context, f *factory, m *fleet.Manager, c *runningCoord, opts *upOptions, job *jobfile.Job, rec *jobRecord, nodes []node) (*jobReport, error) {
	id := rec.ID
	why, exits := watchJob(ctx, f, c, opts, job, id, nodes)
	fmt.Fprintf(f.io.ErrOut, "job %s: %s\n", id, why)
	choice := upCollect
	if ctx.Err() != nil {
		choice = interruptChoice(f, opts, ctx)
	}
	var runErr error
	if job.Run != "" && ctx.Err() == nil {
		failed := 0
		// A node still running at max_duration was stopped, not failed.
		for _, n := range nodes {
			if code, ok := exits[n.ID]; ok && code != 0 {
				failed++
			}
		}
		runErr = fanOutError("the run command", failed, len(nodes))
	}
	return finishJob(ctx, f, m, c, opts, job, rec, nodes, choice, runErr)
}

// upCandidates are the offers to launch from, best first, and for a
// planned job the planner's estimate of the picked option.
func upCandidates(ctx context.Context, f *factory, job *jobfile.Job) ([]market.Ranked, float64, string, error) {
	if !job.Planned() {
		qf := &queryFlags{Type: "on-demand", Order: "score-", Storage: job.Disk, SweepLimit: 1000}
		if qf.Storage == 0 {
			qf.Storage = 20
		}
		rf := &rankFlags{By: job.By}
		ranked, _, err := rankedOffers(ctx, f, qf, rf, []string{job.Query}, qf.SweepLimit)
		if err != nil {
			return nil, 0, "", err
		}
		return ranked, 0, "", nil
	}
	req, err := plan.Requirements(*job.Task)
	if err != nil {
		return nil, 0, "", usageError{err}
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, 0, "", err
	}
	offers, err := searchTiers(ctx, f, req, p.SearchOffers)
	if err != nil {
		return nil, 0, "", err
	}
	res, err := plan.Options(*job.Task, req, offers)
	if err != nil {
		return nil, 0, "", fmt.Errorf("%w; nothing was rented", err)
	}
	printPlan(f.io.ErrOut, req, res, false)
	if res.OverBudget {
		return nil, 0, "", usagef("every option costs more than max_budget $%.2f: nothing rented (raise it, shorten the task or quantize)", job.Task.MaxBudget)
	}
	pick := pickOption(res.Options, job.Option)
	if job.Option == "" && f.io.InTTY && f.io.ErrTTY {
		if k := askPick(f.io, len(res.Options)); k > 0 {
			pick = k - 1
		}
	}
	o := res.Options[pick]
	fmt.Fprintf(f.io.ErrOut, "renting option %d (%s): %dx %s at $%.3f/hr, estimated %.2f h, %s\n", o.Rank, o.Label, o.NumGPUs, o.GPUName, o.DPHTotal, o.EstHours, money(o.EstTotal))
	// The other options follow as replacements, should the pick fail.
	cands := []market.Ranked{{Offer: o.Offer}}
	for i, other := range res.Options {
		if i != pick {
			cands = append(cands, market.Ranked{Offer: other.Offer})
		}
	}
	return cands, o.EstTotal, fmt.Sprintf("the planner's option %d (%s): %.2f h at $%.3f/hr plus transfer", o.Rank, o.Label, o.EstHours, o.DPHTotal), nil
}

// pickOption is the index of the option labelled want (best_value when
// unset); the cheapest when no option carries the label.
func pickOption(opts []plan.Option, want string) int {
	if want == "" {
		want = jobfile.OptionBestValue
	}
	label := strings.ReplaceAll(want, "_", " ")
	for i, o := range opts {
		for _, l := range strings.Split(o.Label, ", ") {
			if l == label {
				return i
			}
		}
	}
	return 0
}

// jobSessions are the agent's sessions: run (once, never restarted, so
// that its exit ends the job) and the named sessions, each waiting for
// the go marker (the agent waits before it starts one, so an item worker
// leases nothing on a node left out of the run), with the node's rank
// variables and the workdir.
func jobSessions(f *factory, job *jobfile.Job) []launch.Session {
	wd := remoteWorkdir
	if f.opts.Market == "sim" {
		wd = simRelative(wd)
	}
	wrap := func(cmd string) string {
		return `until [ -e "$HOME/` + goMarker + `" ]; do sleep 0.2; done; . "$HOME/` + goMarker + `"; mkdir -p ` + wd + ` && cd ` + wd + ` && ` + cmd
	}
	var out []launch.Session
	if job.Run != "" {
		out = append(out, launch.Session{Name: runSession, Command: wrap(job.Run), Restart: "never", After: goMarker})
	}
	for _, s := range job.Sessions {
		out = append(out, launch.Session{Name: s.Name, Command: wrap(s.Command), After: goMarker})
	}
	return out
}

// prepareNodes syncs the workdir, runs setup and writes the go marker on
// every node; nodes that fail a step are left out of the run.
func prepareNodes(ctx context.Context, f *factory, job *jobfile.Job, id string, nodes []node) ([]node, error) {
	prov, err := f.Provider(ctx)
	if err != nil {
		return nil, err
	}
	logs, err := jobDir(f, id)
	if err != nil {
		return nil, err
	}
	keep := func(step string, failed map[int64]string) error {
		for _, n := range nodes {
			if why, ok := failed[n.ID]; ok {
				fmt.Fprintf(f.io.ErrOut, "job %s: %s failed on %s (instance %d): %s; it is left out of the run\n", id, step, n.Name, n.ID, termSafe(why))
			}
		}
		nodes = slices.DeleteFunc(nodes, func(n node) bool { _, bad := failed[n.ID]; return bad })
		if len(nodes) == 0 {
			return fmt.Errorf("job %s: %s failed on every node", id, step)
		}
		return nil
	}
	if job.Workdir != "" {
		files, err := remote.ScanTree(job.Workdir, ignore.Parse("", strings.Join(defaultExcludes, "\n")), nil)
		if err != nil {
			return nodes, usagef("workdir %s: %v", job.Workdir, err)
		}
		rows, err := syncNodes(ctx, f, prov, nodes, job.Workdir, files, remoteWorkdir, 64, 3, false)
		if err != nil {
			return nodes, err
		}
		failed := map[int64]string{}
		var sent int64
		for _, r := range rows {
			if r.Error != "" {
				failed[r.ID] = r.Error
			}
			sent += r.WireBytes
		}
		fmt.Fprintf(f.io.ErrOut, "job %s: synced %s (%d files, %d bytes sent) to %d node(s)\n", id, job.Workdir, len(files), sent, len(rows)-len(failed))
		if err := keep("sync", failed); err != nil {
			return nodes, err
		}
	}
	wd := remoteWorkdir
	if f.opts.Market == "sim" {
		wd = simRelative(wd)
	}
	for i, cmd := range job.Setup {
		dir := filepath.Join(logs, fmt.Sprintf("setup-%d", i+1))
		rows, err := execOnNodes(ctx, f, prov, nodes, "mkdir -p "+wd+" && cd "+wd+" && "+cmd, 64, 0, dir, true)
		if err != nil {
			return nodes, err
		}
		failed := map[int64]string{}
		for _, r := range rows {
			if r.Error != "" || r.ExitCode != 0 {
				failed[r.ID] = fmt.Sprintf("exit %d %s (log: %s)", r.ExitCode, r.Error, r.OutputFile)
			}
		}
		fmt.Fprintf(f.io.ErrOut, "job %s: setup %d/%d done on %d node(s): %s\n", id, i+1, len(job.Setup), len(rows)-len(failed), termSafe(cmd))
		if err := keep("setup", failed); err != nil {
			return nodes, err
		}
	}
	// The marker carries the rank variables into the sessions.
	start := `{ for v in VASTFLEET_NODE_RANK VASTFLEET_NUM_NODES VASTFLEET_MASTER_ADDR VASTFLEET_GPUS_PER_NODE VASTFLEET_NODE_NAME; do eval "printf 'export %s=%s\n' $v \"\$$v\""; done; } > "$HOME/` + goMarker + `.tmp" && mv -f "$HOME/` + goMarker + `.tmp" "$HOME/` + goMarker + `"`
	rows, err := execOnNodes(ctx, f, prov, nodes, start, 64, 0, filepath.Join(logs, "start"), true)
	if err != nil {
		return nodes, err
	}
	failed := map[int64]string{}
	for _, r := range rows {
		if r.Error != "" || r.ExitCode != 0 {
			failed[r.ID] = fmt.Sprintf("exit %d %s", r.ExitCode, r.Error)
		}
	}
	if err := keep("start", failed); err != nil {
		return nodes, err
	}
	fmt.Fprintf(f.io.ErrOut, "job %s: started on %d node(s)\n", id, len(nodes))
	return nodes, nil
}

// watchJob shows the run until it ends: run exited on every node (or its
// node died), max_duration passed, or ctx ended. It returns why, and the
// run command's exit code per instance.
func watchJob(ctx context.Context, f *factory, c *runningCoord, opts *upOptions, job *jobfile.Job, id string, nodes []node) (string, map[int64]int) {
	clk := f.Clock()
	began := clk.Now()
	var live *liveView
	if !opts.JSON {
		live = openLiveView(f.io, "job "+id)
	}
	defer live.close()
	var lastLine time.Time
	exits := map[int64]int{}
	want := map[int64]bool{}
	for _, n := range nodes {
		want[n.ID] = true
	}
	tick := time.NewTicker(opts.poll)
	defer tick.Stop()
	for {
		snap := c.Srv.Snapshot(ctx, id)
		ended, dead := 0, 0
		for _, n := range snap.Nodes {
			if !want[n.InstanceID] {
				continue
			}
			for _, s := range n.Sessions {
				if s.Name == runSession && (s.State == "exited" || s.State == "failed") && s.ExitCode != nil {
					exits[n.InstanceID] = *s.ExitCode
				}
			}
			if _, ok := exits[n.InstanceID]; !ok && n.State == "dead" {
				dead++
			}
		}
		ended = len(exits)
		t := snap.Totals
		items := ""
		if t.ItemsDone+t.ItemsLeft > 0 {
			items = fmt.Sprintf("items %d/%d %s  ", t.ItemsDone, t.ItemsDone+t.ItemsLeft, itemsETA(t.ItemsDone, t.ItemsLeft, clk.Now().Sub(began)))
		}
		line := fmt.Sprintf("nodes %d alive %d stale %d dead  run exited %d/%d  %sfindings %d  %s$%.3f/hr  $%.2f spent  %s",
			t.NodesAlive, t.NodesStale, t.NodesDead, ended, len(nodes), items, t.Findings, metricText(t.Metrics), t.DPH, t.Spent, clk.Now().Sub(began).Round(time.Second))
		switch {
		case live != nil && t.ItemsDone+t.ItemsLeft > 0:
			live.update(t.ItemsDone, t.ItemsDone+t.ItemsLeft, "items  "+line)
		case live != nil:
			live.update(int64(ended), int64(len(nodes)), "run exited  "+line)
		case time.Since(lastLine) >= 5*time.Second:
			// Throttled in wall time, stamped in the market's, as the
			// launch's lines are.
			lastLine = time.Now()
			fmt.Fprintf(f.io.ErrOut, "%s job %s: %s\n", clk.Now().UTC().Format("15:04:05"), id, line)
		}
		switch {
		case job.Run != "" && ended+dead >= len(nodes):
			if dead > 0 {
				return fmt.Sprintf("run exited on %d node(s); %d node(s) stopped reporting", ended, dead), exits
			}
			return fmt.Sprintf("run exited on all %d node(s); %d finding(s)", ended, t.Findings), exits
		case t.ItemsDone > 0 && t.ItemsLeft == 0:
			// Every item has its one result: what runs on is spare (a
			// node whose agent never came back, say), and is destroyed.
			return fmt.Sprintf("all %d item(s) done; run exited on %d of %d node(s)", t.ItemsDone, ended, len(nodes)), exits
		case job.MaxDuration > 0 && clk.Now().Sub(began) >= job.MaxDuration:
			return fmt.Sprintf("max_duration %s reached; %d finding(s)", job.MaxDuration, t.Findings), exits
		}
		select {
		case <-ctx.Done():
			return "interrupted", exits
		case <-tick.C:
		}
	}
}

// itemsETA is the market time the items left need at the rate so far
// ("ETA -" before the first is done).
func itemsETA(done, left int64, elapsed time.Duration) string {
	if done == 0 || elapsed <= 0 {
		return "ETA -"
	}
	return "ETA " + (time.Duration(float64(elapsed) / float64(done) * float64(left))).Round(time.Second).String()
}

func metricText(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %s  ", k, humanNumber(m[k]))
	}
	return b.String()
}

func humanNumber(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// interruptChoice is what to do after Ctrl+C: the flag, the answer on a
// terminal, else collect and destroy. Without an interrupt: collect.
func interruptChoice(f *factory, opts *upOptions, ctx context.Context) string {
	if ctx.Err() == nil {
		return upCollect
	}
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

// finishJob collects, destroys (unless kept) and reports. It runs on a
// context of its own: teardown outlives Ctrl+C.
func finishJob(ctx context.Context, f *factory, m *fleet.Manager, c *runningCoord, opts *upOptions, job *jobfile.Job, rec *jobRecord, nodes []node, choice string, cause error) (*jobReport, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Minute)
	defer cancel()
	if choice == upKeep {
		rec.State = "kept"
		saveJob(f, rec)
		fmt.Fprintf(f.io.ErrOut, "job %s: the nodes keep running (and billing); `vastfleet down %s` collects, destroys and reports\n", rec.ID, rec.ID)
		return nil, errors.Join(cause, launch.ErrInterrupted)
	}
	var errs []error
	if cause != nil {
		errs = append(errs, cause)
	}
	if choice == upCollect {
		if err := collectJob(cctx, f, c, rec, nodes); err != nil {
			errs = append(errs, err)
		}
	}
	destroy := job == nil || job.AutoDestroy || choice == upDestroy || cause != nil && len(nodes) == 0
	if destroy {
		if err := destroyJob(cctx, f, m, rec.ID); err != nil {
			errs = append(errs, err)
		}
	} else {
		fmt.Fprintf(f.io.ErrOut, "job %s: auto_destroy is false: the nodes keep running; `vastfleet down %s` ends them\n", rec.ID, rec.ID)
	}
	rep, err := costJob(cctx, f, m, c, rec)
	if err != nil {
		errs = append(errs, err)
	}
	if destroy {
		rec.State = "done"
	} else {
		rec.State = "kept"
	}
	saveJob(f, rec)
	if rep != nil && !opts.JSON {
		printJobReport(f, rep)
	}
	if ctx.Err() != nil {
		errs = append(errs, launch.ErrInterrupted)
	}
	return rep, errors.Join(errs...)
}

// runningNodes splits nodes by what the marketplace lists now: an
// instance that is offline, stopped or gone cannot answer SSH, and trying
// would only wait out the connection retries meant for a booting one. If
// the listing fails, every node is tried.
func runningNodes(ctx context.Context, p provider.Provider, nodes []node) (reachable []node, lost []collectRow) {
	l, err := p.ListInstances(ctx)
	if err != nil {
		return nodes, nil
	}
	state := map[int64]string{}
	for _, row := range l.Instances {
		state[row.ID] = row.Status()
	}
	for _, n := range nodes {
		st, ok := state[n.ID]
		switch {
		case !ok:
			lost = append(lost, collectRow{Node: n.Name, ID: n.ID, Error: "the instance is gone from the marketplace's listing: its files went with it"})
		case st == provider.StateOffline:
			lost = append(lost, collectRow{Node: n.Name, ID: n.ID, Error: "the host is offline: not collected; its files come back only if the host does"})
		case st != provider.StateRunning:
			lost = append(lost, collectRow{Node: n.Name, ID: n.ID, Error: fmt.Sprintf("the instance is %s, not running: not collected (a stopped instance's files can still be copied with vast's copy)", st)})
		default:
			reachable = append(reachable, n)
		}
	}
	return reachable, lost
}

// collectJob pulls results from the nodes and writes every finding the
// coordinator holds to LOCAL/findings.jsonl.
func collectJob(ctx context.Context, f *factory, c *runningCoord, rec *jobRecord, nodes []node) error {
	var errs []error
	if rec.Results != "" && len(nodes) > 0 {
		p, err := f.Provider(ctx)
		if err != nil {
			return err
		}
		reachable, lost := runningNodes(ctx, p, nodes)
		rows, err := collectNodes(ctx, f, p, reachable, rec.Results, filepath.Dir(rec.LocalDir), 64)
		if err != nil {
			return err
		}
		rows = append(rows, lost...)
		files, failed := 0, 0
		for _, r := range rows {
			files += r.Fetched
			if r.Error != "" {
				failed++
				fmt.Fprintf(f.io.ErrOut, "job %s: collecting from instance %d: %s\n", rec.ID, r.ID, termSafe(r.Error))
			}
		}
		fmt.Fprintf(f.io.ErrOut, "job %s: collected %d file(s) from %d node(s) into %s\n", rec.ID, files, len(rows)-failed, rec.LocalDir)
		if err := fanOutError("collect", failed, len(rows)); err != nil {
			errs = append(errs, err)
		}
	}
	if c != nil {
		n, err := writeFindings(ctx, c, rec)
		if err != nil {
			errs = append(errs, err)
		} else if n > 0 {
			fmt.Fprintf(f.io.ErrOut, "job %s: %d finding(s) in %s\n", rec.ID, n, filepath.Join(rec.LocalDir, "findings.jsonl"))
		}
		n, err = writeItemResults(ctx, c, rec)
		if err != nil {
			errs = append(errs, err)
		} else if n > 0 {
			fmt.Fprintf(f.io.ErrOut, "job %s: %d item result(s) in %s\n", rec.ID, n, filepath.Join(rec.LocalDir, "items.jsonl"))
		}
	}
	return errors.Join(errs...)
}

func writeFindings(ctx context.Context, c *runningCoord, rec *jobRecord) (int, error) {
	total, err := c.DB.CountFindings(ctx, rec.ID)
	if err != nil || total == 0 {
		return 0, err
	}
	all, err := c.DB.Findings(ctx, rec.ID, int(total))
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(rec.LocalDir, 0o755); err != nil {
		return 0, err
	}
	var b strings.Builder
	for i := len(all) - 1; i >= 0; i-- { // oldest first
		line, _ := json.Marshal(all[i])
		b.Write(line)
		b.WriteByte('\n')
	}
	return len(all), atomicfile.WriteFile(filepath.Join(rec.LocalDir, "findings.jsonl"), []byte(b.String()), 0o644)
}

// itemLine is one work item's recorded result in items.jsonl.
type itemLine struct {
	ID         int64         `json:"id"`
	Value      string        `json:"value"`
	ExitCode   int           `json:"exit_code"`
	Node       string        `json:"node"`
	StdoutTail string        `json:"stdout_tail"`
	Outputs    []wire.Output `json:"outputs,omitempty"`
	DoneAt     time.Time     `json:"done_at"`
}

// writeItemResults writes every item's one recorded result to
// LOCAL/items.jsonl, by item id.
func writeItemResults(ctx context.Context, c *runningCoord, rec *jobRecord) (int, error) {
	results, err := c.DB.ItemResults(ctx, rec.ID)
	if err != nil || len(results) == 0 {
		return 0, err
	}
	if err := os.MkdirAll(rec.LocalDir, 0o755); err != nil {
		return 0, err
	}
	var b strings.Builder
	for _, r := range results {
		line, _ := json.Marshal(itemLine{ID: r.ID, Value: r.Value, ExitCode: r.ExitCode, Node: r.Node,
			StdoutTail: r.StdoutTail, Outputs: r.Outputs, DoneAt: r.DoneAt})
		b.Write(line)
		b.WriteByte('\n')
	}
	return len(results), atomicfile.WriteFile(filepath.Join(rec.LocalDir, "items.jsonl"), []byte(b.String()), 0o644)
}

// destroyJob destroys every live instance of the job's fleet.
func destroyJob(ctx context.Context, f *factory, m *fleet.Manager, id string) error {
	live, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: id})
	if err != nil {
		return err
	}
	ids := make([]int64, 0, len(live))
	for _, r := range live {
		ids = append(ids, r.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	if err := m.Destroy(ctx, ids); err != nil {
		return fmt.Errorf("job %s: destroying: %w (`vastfleet down %s` tries again)", id, err, id)
	}
	fmt.Fprintf(f.io.ErrOut, "job %s: destroyed %d instance(s)\n", id, len(ids))
	return nil
}

// jobReport is a job's cost: per node and in all, against the estimate.
type jobReport struct {
	Job       string    `json:"job"`
	At        time.Time `json:"at"`
	Nodes     []jobNode `json:"nodes"`
	Ran       int       `json:"nodes_ran"`
	Compute   float64   `json:"compute"`
	Storage   float64   `json:"storage"`
	Bandwidth float64   `json:"bandwidth"`
	// Waste is what instances that never ran the job cost: failed
	// boots, surplus spares, replaced nodes.
	Waste      float64 `json:"failed_launch_waste"`
	Total      float64 `json:"total"`
	Estimate   float64 `json:"estimate"`
	EstimateOf string  `json:"estimate_of"`
	Findings   int64   `json:"findings"`
	// Work items: done (a result recorded once each), of which failed
	// (non-zero exit), and left (never finished: queued or leased).
	ItemsDone   int    `json:"items_done"`
	ItemsFailed int    `json:"items_failed"`
	ItemsLeft   int    `json:"items_left"`
	Live        int    `json:"instances_live"`
	Dashboard   string `json:"dashboard,omitempty"`
}

type jobNode struct {
	ID        int64   `json:"id"`
	Ran       bool    `json:"ran"`
	State     string  `json:"state"`
	Running   float64 `json:"running_seconds"`
	Compute   float64 `json:"compute"`
	Storage   float64 `json:"storage"`
	Bandwidth float64 `json:"bandwidth"`
	Total     float64 `json:"total"`
}

func costJob(ctx context.Context, f *factory, m *fleet.Manager, c *runningCoord, rec *jobRecord) (*jobReport, error) {
	cr, err := m.Cost(ctx, rec.ID)
	if err != nil {
		return nil, err
	}
	ran := map[int64]bool{}
	for _, id := range rec.RunIDs {
		ran[id] = true
	}
	rep := &jobReport{Job: rec.ID, At: cr.At, Estimate: rec.Estimate, EstimateOf: rec.EstimateOf, Dashboard: rec.Dashboard}
	for _, in := range cr.Instances {
		n := jobNode{ID: in.InstanceID, Ran: ran[in.InstanceID], State: in.State, Running: in.Running.Seconds(),
			Compute: in.Compute, Storage: in.Storage, Bandwidth: in.Bandwidth, Total: in.Total}
		if !in.Live {
			n.State = "destroyed"
		}
		rep.Nodes = append(rep.Nodes, n)
		rep.Compute += n.Compute
		rep.Storage += n.Storage
		rep.Bandwidth += n.Bandwidth
		rep.Total += n.Total
		if n.Ran {
			rep.Ran++
		} else {
			rep.Waste += n.Total
		}
		if in.Live {
			rep.Live++
		}
	}
	if c != nil {
		if n, err := c.DB.CountFindings(ctx, rec.ID); err == nil {
			rep.Findings = n
		}
		if queued, leased, _, err := c.DB.ItemCounts(ctx, rec.ID); err == nil {
			rep.ItemsLeft = queued + leased
		}
		if results, err := c.DB.ItemResults(ctx, rec.ID); err == nil {
			rep.ItemsDone = len(results)
			for _, r := range results {
				if r.ExitCode != 0 {
					rep.ItemsFailed++
				}
			}
		}
	}
	if d, err := jobDir(f, rec.ID); err == nil {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := atomicfile.WriteFile(filepath.Join(d, "report.json"), b, 0o600); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func printJobReport(f *factory, rep *jobReport) {
	w := f.io.Out
	fmt.Fprintf(w, "cost report for job %s\n", rep.Job)
	const perNode = 12
	if len(rep.Nodes) <= perNode {
		t := newTable(w, "INSTANCE", "RAN", "STATE", "RUNNING", "COMPUTE", "STORAGE", "BANDWIDTH", "TOTAL")
		for _, n := range rep.Nodes {
			t.row(strconv.FormatInt(n.ID, 10), map[bool]string{true: "yes", false: "no"}[n.Ran], n.State,
				(time.Duration(n.Running) * time.Second).String(), money(n.Compute), money(n.Storage), money(n.Bandwidth), money(n.Total))
		}
		t.flush()
	} else {
		fmt.Fprintf(w, "  %d instances (per instance: `vastfleet cost --fleet %s`, or --json)\n", len(rep.Nodes), rep.Job)
	}
	fmt.Fprintf(w, "  compute    %s\n  storage    %s\n  bandwidth  %s\n", money(rep.Compute), money(rep.Storage), money(rep.Bandwidth))
	fmt.Fprintf(w, "  failed-launch waste %s (instances that never ran the job: %d of %d)\n", money(rep.Waste), len(rep.Nodes)-rep.Ran, len(rep.Nodes))
	fmt.Fprintf(w, "  total      %s", money(rep.Total))
	if rep.Estimate > 0 {
		fmt.Fprintf(w, " against an estimate of %s (%s)", money(rep.Estimate), rep.EstimateOf)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  findings   %d\n", rep.Findings)
	if rep.ItemsDone+rep.ItemsLeft > 0 {
		fmt.Fprintf(w, "  items      %d done (%d failed), %d left\n", rep.ItemsDone, rep.ItemsFailed, rep.ItemsLeft)
	}
	fmt.Fprintf(w, "  instances still live %d\n", rep.Live)
}

// depthQuery is the dashboard's market-depth plot for a search job: its
// own query.
func depthQuery(job *jobfile.Job) string {
	if job.Planned() {
		return ""
	}
	return job.Query
}
