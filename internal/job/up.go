package job

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Options are what one up runs.
type Options struct {
	Job  *jobfile.Job
	File string // the task file's path
	ID   string
	// ResultsDir holds RESULTS/<job>/.
	ResultsDir string
	// Resumed is the record of the job to continue, nil for a new one.
	Resumed *Record
	// CoordAddr is where the coordinator listens (the agents' address
	// of it), Dashboard its link for this job.
	CoordAddr, Dashboard string
	// ScanWorkdir reads the workdir as its sync will (for Check).
	ScanWorkdir func(dir string) error
}

// runner is one up: the job's record and the nodes that run it.
type runner struct {
	d     *Deps
	o     Options
	rec   *Record
	nodes []Node
	est   Estimate
	// launched is when this up's launch ended (zero when it resumed a
	// running job), began when the watch of the run began; repl rents
	// the cull policy's replacements during it.
	launched, began time.Time
	repl            *replacer
	// released are the nodes whose run exited that the job destroyed
	// before the others' ended.
	released []Node
	// kept: exited nodes whose results did not all come back; the
	// finish collects them again before it destroys them.
	kept map[int64]bool
}

// Up runs a job: plan or search, launch, prepare, start, watch, finish. A
// resumed job continues from where its record says it was cut off. The
// report is nil when nothing was rented or the nodes were kept.
func Up(ctx context.Context, d *Deps, o Options) (*Report, error) {
	r := &runner{d: d, o: o}
	if !r.resumeRunning() {
		if err := Check(o.Job, o.ScanWorkdir); err != nil {
			return nil, err
		}
	}
	cands, err := r.plan(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.begin(ctx); err != nil {
		return nil, err
	}
	if r.resumeRunning() {
		return r.resumeRun(ctx)
	}
	sum, err := r.launch(ctx, cands)
	if err != nil || sum.Interrupted {
		return r.finish(ctx, d.choice(ctx), err)
	}
	if err := r.ready(ctx, sum); err != nil {
		return r.finish(ctx, Collect, err)
	}
	if err := r.prepare(ctx); err != nil {
		return r.finish(ctx, d.choice(ctx), err)
	}
	return r.watchAndFinish(ctx)
}

// resumeRunning: a resumed job past its launch (it needs no offers).
func (r *runner) resumeRunning() bool {
	p := r.o.Resumed
	return p != nil && (p.State == StateRunning || p.State == StateKept)
}

// plan is the offers to launch from, and the estimate (for a planned job).
func (r *runner) plan(ctx context.Context) (*candidates, error) {
	if r.resumeRunning() || r.launchCutOff(ctx) {
		return nil, nil
	}
	cands, est, err := r.d.Launcher.Candidates(ctx)
	if err != nil {
		return nil, err
	}
	r.est = est
	return &candidates{cands}, nil
}

// launchCutOff: a resumed job whose launch was recorded (it rented).
func (r *runner) launchCutOff(ctx context.Context) bool {
	if r.o.Resumed == nil {
		return false
	}
	_, err := r.d.Store.GetFleet(ctx, r.o.ID)
	return err == nil
}

// begin records the job (or takes up its record) and shows its dashboard.
func (r *runner) begin(ctx context.Context) error {
	o := r.o
	r.rec = &Record{ID: o.ID, File: o.File, State: StateLaunching, StartedAt: r.d.Clock.Now().UTC(), Results: o.Job.Results,
		LocalDir: localDir(o.ResultsDir, o.ID), AutoDestroy: o.Job.AutoDestroy}
	if o.Resumed != nil {
		r.rec = o.Resumed
	}
	r.rec.PID = os.Getpid()
	if o.CoordAddr != "" {
		r.rec.CoordAddr = o.CoordAddr
	}
	r.rec.Dashboard = o.Dashboard
	if err := r.save(ctx); err != nil {
		return err
	}
	r.d.emit(Dashboard{About{o.ID}, o.Dashboard})
	return nil
}

func (r *runner) save(ctx context.Context) error { return r.d.Records.Save(ctx, r.rec) }

// launch rents the fleet, or resumes a launch that was cut off.
func (r *runner) launch(ctx context.Context, cands *candidates) (launch.Summary, error) {
	var sum launch.Summary
	var err error
	r.rec.State = StateLaunching
	if cands == nil {
		r.d.emit(LaunchResumed{About{r.rec.ID}})
		sum, err = r.d.Launcher.Resume(ctx)
	} else {
		sum, err = r.d.Launcher.Launch(ctx, cands.offers)
	}
	r.d.Launcher.Running()
	r.launched = r.d.Clock.Now()
	r.estimate(ctx)
	if err == nil && len(sum.ReadyIDs) == 0 && !sum.Interrupted {
		err = fmt.Errorf("job %s: no node became ready", r.rec.ID)
	}
	return sum, err
}

// estimate keeps the planner's estimate, else the launch's own
// projection: every node at its $/hr for the run (max_duration, else the
// launch horizon), plus the image pulls.
func (r *runner) estimate(ctx context.Context) {
	est := r.est
	if est.Total == 0 {
		if fl, err := r.d.Store.GetFleet(ctx, r.rec.ID); err == nil {
			est = projection(fl, r.o.Job)
		}
	}
	if est.Total > 0 || r.rec.Estimate == 0 {
		r.rec.Estimate, r.rec.EstimateOf = est.Total, est.Of
	}
}

func projection(fl store.Fleet, j *jobfile.Job) Estimate {
	pulls := max(fl.EstCost-fl.EstDPH*fl.EstHours, 0)
	hours, of := fl.EstHours, "launch horizon"
	if j.MaxDuration > 0 {
		hours, of = j.MaxDuration.Hours(), "max_duration"
	}
	return Estimate{Total: fl.EstDPH*hours + pulls,
		Of: fmt.Sprintf("%d nodes at $%.3f/hr for the %s (%.2f h) plus $%.2f of image pulls", j.Count, fl.EstDPH, of, hours, pulls)}
}

// ready takes the launch's ready nodes as the job's.
func (r *runner) ready(ctx context.Context, sum launch.Summary) error {
	r.d.emit(Launched{About: About{r.rec.ID}, Ready: sum.Ready, Asked: sum.Asked, Rented: sum.Rented, Failed: sum.Failed, DPH: sum.DPHTotal})
	nodes, err := r.d.Nodes.Select(ctx, sum.ReadyIDs)
	if err != nil {
		return err
	}
	r.nodes = nodes
	r.rec.State = StateRunning
	r.rec.RunIDs = ids(nodes)
	return r.save(ctx)
}

// resumeRun continues a job whose nodes were running its run when its up
// ended: the nodes that still run are watched to the end (their agents
// kept going, or come back to the coordinator at its old address), then
// the job finishes as usual.
func (r *runner) resumeRun(ctx context.Context) (*Report, error) {
	live, err := r.d.Store.Instances(ctx, store.InstanceFilter{Fleet: r.rec.ID})
	if err != nil {
		return nil, err
	}
	var running []int64
	for _, in := range live {
		if in.State == "running" && slices.Contains(r.rec.RunIDs, in.ID) {
			running = append(running, in.ID)
		}
	}
	if len(running) == 0 {
		return r.finish(ctx, Collect, fmt.Errorf("job %s: none of its nodes still runs", r.rec.ID))
	}
	// The market moves on by itself, as after a launch.
	r.d.Launcher.Running()
	if r.nodes, err = r.d.Nodes.Select(ctx, running); err != nil {
		return r.finish(ctx, Collect, err)
	}
	r.rec.State = StateRunning
	if !r.rec.Started {
		// Cut off between the launch and the go marker: sync, setup and
		// start again (each step can run twice).
		if err := r.prepare(ctx); err != nil {
			return r.finish(ctx, r.d.choice(ctx), err)
		}
	} else if err := r.save(ctx); err != nil {
		return r.finish(ctx, Collect, err)
	}
	r.d.emit(Resumed{About{r.rec.ID}, len(r.nodes), len(r.rec.RunIDs)})
	return r.watchAndFinish(ctx)
}

// watchAndFinish watches the run to its end, then finishes the job.
func (r *runner) watchAndFinish(ctx context.Context) (*Report, error) {
	if r.d.Launcher != nil {
		r.d.Launcher.RunStarted()
	}
	r.began = r.d.Clock.Now()
	r.repl = newReplacer(ctx, r)
	end := watch(ctx, r.d, r.o.Job, r.rec.ID, r.nodes, r.judging(ctx))
	r.repl.stop(ctx)
	r.d.emit(Ended{About{r.rec.ID}, end.why})
	r.rec.Ended = end.why
	if ctx.Err() != nil {
		return r.finish(ctx, r.d.choice(ctx), nil)
	}
	return r.finish(ctx, Collect, runOutcome(r.o.Job, append(slices.Clone(r.nodes), r.released...), end))
}

// judging is the watch's judge: the job's cull policy, and the release of
// nodes whose run exited (releases); nil when neither applies.
func (r *runner) judging(ctx context.Context) judge {
	c := newCuller(ctx, r.d, r.o.Job, r.rec.ID)
	release := r.releases()
	if c == nil && !release {
		return nil
	}
	return func(ctx context.Context, snap wire.Snapshot, running map[int64]bool) verdict {
		var v verdict
		if c != nil {
			v.in = r.repl.joined(ctx)
			for id := range running {
				if _, ok := c.inst[id]; !ok {
					c.refresh(ctx, r.d)
					break
				}
			}
			for _, k := range c.observe(snap, running) {
				r.cull(ctx, k, c, snap.Totals)
				v.out = append(v.out, k.ID)
			}
			for _, id := range v.in {
				running[id] = true // joined now: its run starts
			}
		}
		if release {
			r.releaseExited(ctx, running, snap.Totals)
		}
		v.coming = r.repl.coming()
		return v
	}
}

// candidates are the launch's offers, nil for a launch that resumes.
type candidates struct{ offers []market.Ranked }

// localDir is where the job's results land: RESULTS/<job>.
func localDir(results, id string) string { return filepath.Join(results, id) }

func ids(nodes []Node) []int64 {
	out := make([]int64, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}
