package factory

import (
	"cmp"
	"context"
	"maps"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// UpJob is a job as up runs it: its task file, its name, the coordinator
// started for it, and what the command gives of its own.
type UpJob struct {
	Job         *jobfile.Job
	File, ID    string
	Coord       *coord.Running
	OrphanAfter time.Duration
	// Options the command takes from its flags (job.Options).
	ResultsDir, CoordAddr string
	Resumed               *job.Record
	Poll                  time.Duration
	// OnInterrupt is up --on-interrupt: Ctrl+C's choice, asked on a
	// terminal when empty (job.AskChoice).
	OnInterrupt string
	// Offers are JobLauncher.Offers.
	Offers func(ctx context.Context, spec *launch.Spec) ([]market.Ranked, job.Estimate, *launch.Accepted, error)
}

// UpDeps are a job's dependencies for job.Up: the launch spec with the
// agent on every node, the market's lifecycle manager (reconciled), the
// nodes, the records; the job's validation is registered with its
// coordinator first.
func (f *Factory) UpDeps(ctx context.Context, u UpJob) (*job.Deps, job.Options, error) {
	jf, id := u.Job, u.ID
	ladder := job.Ladder(jf)
	req := job.LaunchRequest(jf, id)
	spec, err := req.Spec(launch.InterruptKeep, time.Now())
	if err != nil {
		return nil, job.Options{}, err
	}
	maps.Copy(spec.Create.Env, job.NodeEnv(jf))
	wd := f.WorkdirOnNode()
	spec.Sessions = job.Sessions(jf, wd)
	if err := u.Coord.DB.SetValidation(ctx, id, job.CoordValidation(jf.Validate)); err != nil {
		return nil, job.Options{}, err
	}
	err = f.WithAgents(ctx, &spec, Agents{Coord: "auto", Items: jf.Items, OrphanAfter: u.OrphanAfter, OrphanPolicy: wire.PolicyStop,
		Ladder: ladder, Onstart: req.Onstart, OnShortHardware: jf.OnShortHardware})
	if err != nil {
		return nil, job.Options{}, err
	}
	if spec.Checks, err = f.LaunchChecks(ctx, "", "auto", "", id); err != nil {
		return nil, job.Options{}, err
	}
	if !job.JudgesHardware(jf) {
		spec.Hardware = nil
	}
	m, err := f.Manager(ctx, HolderName("up", u.File))
	if err != nil {
		return nil, job.Options{}, err
	}
	if err := launch.BeforeRenting(ctx, m, id, ladder); err != nil {
		return nil, job.Options{}, err
	}
	recs, err := f.JobRecords(ctx)
	if err != nil {
		return nil, job.Options{}, err
	}
	_, viewer, err := u.Coord.DB.FleetTokens(ctx, id)
	if err != nil {
		return nil, job.Options{}, err
	}
	o := job.Options{Job: jf, File: u.File, ID: id, ResultsDir: u.ResultsDir, Resumed: u.Resumed,
		Dashboard: coord.DashboardURL(u.Coord.URL, viewer), ScanWorkdir: ScanWorkdir, CoordAddr: job.AdvertisedAddr(u.CoordAddr, u.Coord.Addr.String())}
	d := &job.Deps{Provider: m.P, Store: m.S, Fleet: m, Clock: f.Clock(), Coord: u.Coord.Srv, Results: u.Coord.DB,
		Nodes: f.JobNodes(m.P), Records: recs, Poll: u.Poll, WorkdirOnNode: wd,
		Launcher: &JobLauncher{F: f, M: m, Spec: spec, ID: id, Offers: u.Offers, View: func() (func(launch.Event), func()) {
			return jobLaunchView(f.IO)
		}},
		Choose: func() string { return job.AskChoice(u.OnInterrupt, f.IO.In, f.IO.ErrOut, f.IO.InTTY) }}
	return d, o, nil
}

// TaskMarket is the market an up's task file chooses (market: or gpu:),
// read before the factory is built, for the up's Needs: the file given
// (jobfile.DefaultName when none), or with resume the job's own, as the
// store recorded it. "" when it chooses none or the job runs on a
// server, or when the file cannot be read: up then says why, as it reads
// it again to run it.
func (f *Factory) TaskMarket(resume, file string) string {
	if cl, err := f.ServerClient(); err != nil || cl != nil {
		return ""
	}
	path := cmp.Or(file, jobfile.DefaultName)
	if resume != "" && file == "" {
		recs, err := f.JobRecords(context.Background())
		if err != nil {
			return ""
		}
		rec, err := recs.Load(context.Background(), resume)
		if err != nil {
			return ""
		}
		path = rec.File
	}
	jf, err := jobfile.Load(path)
	if err != nil {
		return ""
	}
	return jf.Market
}

// PlanSearch searches the marketplace for a plan's tiers of cards
// (plan.SearchTiers): a planned up's job.Planner.Search.
func (f *Factory) PlanSearch(ctx context.Context, req plan.Req) ([]market.Offer, error) {
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, err
	}
	return plan.SearchTiers(ctx, req, p.SearchOffers, f.Log)
}

// jobLaunchView shows a job's launch as launch's own view does, less the
// launch's interrupt line: inside a job the launch keeps its instances
// ("interrupted (keep): 0 instances to destroy; `launch --resume` ...")
// and the job says what it does with them (--on-interrupt), so that line
// would contradict the user's choice and name the wrong command.
func jobLaunchView(ios *iostreams.IOStreams) (event func(launch.Event), stop func()) {
	v := launch.NewView(ios, nil)
	return func(e launch.Event) {
		if e.Event != launch.EvInterrupted {
			v.Event(e)
		}
	}, v.Stop
}
