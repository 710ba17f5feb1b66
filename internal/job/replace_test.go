package job

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// TestUpReplacesACulledNode: on the simulated market, the store and the
// coordinator, a launched job's slowest node per dollar is culled and a
// replacement is rented from the job's offers (not on the culled
// machine), prepared (its go marker written) and run: it reports keys,
// is counted in the job's nodes, record and report, and is destroyed at
// the end with the rest.
func TestUpReplacesACulledNode(t *testing.T) {
	t.Parallel()
	// The replacement pays while the job has over twice its load time
	// left. The load is the launch's median boot, on a stepped clock whose
	// market time grows with this computer's load (47 s to 2m33s in three
	// quiet runs, 1h20m in a loaded full suite, where 2 h left did not
	// pay): 6 h leaves room for a busy computer.
	run, culls := runCullJob(t, cullJob{policy: &jobfile.Cull{Below: 0.5, After: 5 * time.Minute}, launched: true, maxDuration: 6 * time.Hour})
	if len(culls) != 1 || culls[0].ID != run.slow {
		t.Fatalf("culls %+v, want instance %d", culls, run.slow)
	}
	if rp := culls[0].Replacement; rp == nil || rp.State != Replacing || !rp.Payback.Pays {
		t.Fatalf("the cull's replacement %+v, want one being rented that pays", rp)
	}
	if len(run.rec.Culls) != 1 || run.rec.Culls[0].Replacement == nil {
		t.Fatalf("recorded culls %+v", run.rec.Culls)
	}
	rp := *run.rec.Culls[0].Replacement
	if rp.State != Replaced || rp.InstanceID == 0 || slices.Contains(run.ids, rp.InstanceID) {
		t.Fatalf("recorded replacement %+v, want a new instance replaced", rp)
	}
	if !slices.Equal(run.started, []int64{rp.InstanceID}) {
		t.Errorf("the job prepared %v, want the replacement %d alone", run.started, rp.InstanceID)
	}
	// It takes the culled node's place: its name and rank (its rank
	// variables), its own logs beside the culled node's.
	var culled Node
	for i, id := range run.ranked {
		if id == run.slow {
			culled = Node{ID: id, Name: fmt.Sprint("C.", id), Rank: i}
		}
	}
	if culled.Rank == 0 {
		t.Fatalf("the culled node %+v is rank 0: the test tells no place from a fresh selection's", culled)
	}
	if len(run.placed) != 1 || run.placed[0] != (Node{ID: rp.InstanceID, Name: culled.Name, Rank: culled.Rank}) {
		t.Errorf("the replacement started as %+v, want instance %d as %s, rank %d", run.placed, rp.InstanceID, culled.Name, culled.Rank)
	}
	jobDir := filepath.Join(run.dir, "jobs", "cull")
	if len(run.logDirs) != 1 || run.logDirs[0] != filepath.Join(jobDir, "replacement-1", "start") {
		t.Errorf("the replacement's start logs went to %v, want %s", run.logDirs, filepath.Join(jobDir, "replacement-1", "start"))
	}
	if !slices.Contains(run.rec.RunIDs, rp.InstanceID) {
		t.Errorf("the record's run ids %v leave out the replacement %d", run.rec.RunIDs, rp.InstanceID)
	}
	if run.keys[rp.InstanceID] <= 0 {
		t.Errorf("the replacement delivered no keys: %v", run.keys)
	}
	ctx := context.Background()
	in, err := run.st.Instance(ctx, rp.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if in.Fleet != "cull" || in.MachineID == culls[0].MachineID || in.GoneAt.IsZero() {
		t.Errorf("replacement %+v: want it in the job's fleet, on another machine than the culled %d, destroyed", in, culls[0].MachineID)
	}
	inReport := false
	for _, n := range run.rep.Nodes {
		inReport = inReport || n.ID == rp.InstanceID && n.Total > 0
	}
	if !inReport {
		t.Errorf("the report leaves out the replacement's cost: %+v", run.rep.Nodes)
	}
	t.Log(run.rep.Culls[0].Line())
	if got := run.rep.Culls[0].Line(); !strings.Contains(got, "replaced by instance") {
		t.Errorf("the report's cull line: %s", got)
	}
	if n := run.live(); n != 0 {
		t.Errorf("%d instance(s) left billing", n)
	}
	ins, err := run.st.Instances(ctx, store.InstanceFilter{Fleet: "cull", IncludeGone: true})
	if err != nil {
		t.Fatal(err)
	}
	// What the replacement's launch rented besides it (a hedge for a
	// slow boot, say) is gone too, and never ran the job. Everything it
	// rented came from offers that pay at the cull's figures: the first
	// offer left (the test's market lists a dearer one first) does not.
	pb := rp.Payback
	_, units := market.Quantity("vcpu")
	judge := stay{pull: pb.Pull, load: pb.Load, left: pb.Left, known: true, median: pb.Median, perUnit: pb.PerUnit, units: units}
	offers := map[int64]market.Ranked{}
	for _, o := range run.offers {
		offers[o.ID] = market.Ranked{Offer: o}
	}
	for _, in := range ins {
		if run.rented[in.ID] {
			continue
		}
		if in.ID != rp.InstanceID && (in.GoneAt.IsZero() || slices.Contains(run.rec.RunIDs, in.ID)) {
			t.Errorf("instance %d rented for the replacement: %+v", in.ID, in)
		}
		if o, ok := offers[in.OfferID]; !ok || !judge.payback(o).Pays {
			t.Errorf("instance %d rented from offer %d, which does not pay (%s)", in.ID, in.OfferID, judge.payback(o).Line())
		}
	}
}

// TestLateCullIsNotReplaced: a node culled when less of the job is left
// than a replacement takes to load is not replaced, and the cull says so
// with the figures; nothing more is rented.
func TestLateCullIsNotReplaced(t *testing.T) {
	t.Parallel()
	run, culls := runCullJob(t, cullJob{policy: &jobfile.Cull{Below: 0.5, After: 29*time.Minute + 30*time.Second}, launched: true, maxDuration: 30 * time.Minute})
	if len(culls) != 1 {
		t.Fatalf("culls %+v, want one", culls)
	}
	rp := culls[0].Replacement
	if rp == nil || rp.State != NotReplaced || rp.Payback.Pays || rp.Payback.Load <= 0 || rp.Payback.Share >= 0.5 {
		t.Fatalf("replacement %+v, want not replaced: too little left for its load time", rp)
	}
	if line := culls[0].Line(); !strings.Contains(line, "not replaced: it would not pay for itself") || !strings.Contains(line, "max_duration 30m") {
		t.Errorf("cull line: %s", line)
	}
	t.Log(culls[0].Line())
	run.nothingMoreRented(t)
}

// TestCullIsNotReplacedFromDearerOffers: when every offer left is dearer
// per advertised unit than the fleet the job launched (its search's best
// value went first), no replacement would deliver the fleet's median per
// dollar, however long the job has left: the cull says so with the
// figures, and nothing more is rented.
func TestCullIsNotReplacedFromDearerOffers(t *testing.T) {
	t.Parallel()
	run, culls := runCullJob(t, cullJob{policy: &jobfile.Cull{Below: 0.5, After: 5 * time.Minute}, launched: true, maxDuration: 6 * time.Hour, byValue: true})
	if len(culls) != 1 || culls[0].ID != run.slow {
		t.Fatalf("culls %+v, want instance %d", culls, run.slow)
	}
	rp := culls[0].Replacement
	if rp == nil || rp.State != NotReplaced || rp.Payback.Pays || rp.Payback.OfferID == 0 || rp.Payback.Share >= 1 || rp.Payback.PerUnit <= 0 {
		t.Fatalf("replacement %+v, want not replaced: judged on an offer, under the median per dollar", rp)
	}
	if line := culls[0].Line(); !strings.Contains(line, "not replaced: it would not pay for itself") || !strings.Contains(line, fmt.Sprint("offer ", rp.Payback.OfferID)) {
		t.Errorf("cull line: %s", line)
	}
	t.Log(culls[0].Line())
	run.nothingMoreRented(t)
}

// nothingMoreRented fails t when the run prepared a node or rented an
// instance after its launch.
func (r cullRun) nothingMoreRented(t *testing.T) {
	t.Helper()
	if len(r.started) != 0 {
		t.Errorf("prepared %v, want nothing", r.started)
	}
	ins, err := r.st.Instances(context.Background(), store.InstanceFilter{Fleet: "cull", IncludeGone: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if !r.rented[in.ID] {
			t.Errorf("instance %d rented after the launch", in.ID)
		}
	}
}

// TestPayback: a replacement pays when what it is expected to deliver
// (the fleet's metric per advertised unit, times the offer's units, once
// loaded), valued at the fleet's median per dollar, covers its cost.
func TestPayback(t *testing.T) {
	t.Parallel()
	// The fleet delivers 1e3/s per core, and its median node 1e4 per $/hr
	// (10 cores at $1/hr): a 10-core offer at $1/hr is the median node.
	const perCore, median = 1e3, 1e4
	offer := func(cores float64, gpus int, dph float64) market.Ranked {
		return market.Ranked{Offer: market.Offer{ID: 7, CPUCoresEffective: cores, NumGPUs: gpus, DPHTotal: dph}}
	}
	for _, c := range []struct {
		name       string
		offer      market.Ranked
		pull       float64
		load, left time.Duration
		known      bool
		pays       bool
		share      float64
	}{
		{"cheaper per core than the median, long left", offer(10, 0, 0.5), 0.01, 5 * time.Minute, 2 * time.Hour, true, true, 1.898},
		{"the median node itself: its load keeps it under", offer(10, 0, 1), 0, 5 * time.Minute, 2 * time.Hour, true, false, 0.958},
		{"left twice the load at half the price: break-even", offer(10, 0, 0.5), 0, 10 * time.Minute, 20 * time.Minute, true, true, 1},
		{"left under twice the load at half the price", offer(10, 0, 0.5), 0, 10 * time.Minute, 19 * time.Minute, true, false, 0.947},
		{"less left than the load", offer(10, 0, 0.1), 0, 10 * time.Minute, 5 * time.Minute, true, false, 0},
		{"the pull tips it", offer(10, 0, 0.5), 0.2, 10 * time.Minute, 40 * time.Minute, true, false, 0.9375},
		{"unknown time left: judged while it runs", offer(12, 0, 1), 0.01, 10 * time.Minute, 0, false, true, 1.2},
		{"unknown time left, dearer per core", offer(8, 0, 1), 0.01, 10 * time.Minute, 0, false, false, 0.8},
	} {
		_, cores := market.Quantity("vcpu")
		s := stay{pull: c.pull, load: c.load, left: c.left, known: c.known, of: "t", median: median, perUnit: perCore, units: cores}
		p := s.payback(c.offer)
		if p.Pays != c.pays || math.Abs(p.Share-c.share) > 0.005 || p.OfferID != 7 {
			t.Errorf("%s: pays %v at %.3f (%s), want %v at %.3f", c.name, p.Pays, p.Share, p.Line(), c.pays, c.share)
		}
	}
	// A job ranked by dlperf counts the offer's dlperf: 20 units at
	// 1e3/s for $1/hr is twice the median per dollar while it runs.
	_, dlperf := market.Quantity("dlperf")
	gpu := market.Ranked{Offer: market.Offer{ID: 8, CPUCoresEffective: 4, NumGPUs: 1, DLPerf: 20, DPHTotal: 1}}
	if p := (stay{median: median, perUnit: perCore, units: dlperf}).payback(gpu); !p.Pays || p.Units != 20 || math.Abs(p.Share-2) > 1e-9 {
		t.Errorf("ranked by dlperf: %+v", p)
	}
	// Its words with no offer left, and for a record from before offers
	// were judged.
	if got := (Payback{Median: median}).Line(); got != "no offer is left to rent it from" {
		t.Errorf("no offer: %q", got)
	}
	if got := (Payback{DPH: 0.1, Share: 0.9, Median: median}).Line(); !strings.Contains(got, "$0.100/hr, 90% of the median") {
		t.Errorf("an older record: %q", got)
	}
	// max_duration and the items' rate: the sooner end wins.
	cases := []struct {
		max, elapsed time.Duration
		done, left   int64
		want         time.Duration
		known        bool
	}{
		{time.Hour, 20 * time.Minute, 0, 0, 40 * time.Minute, true},
		{time.Hour, 20 * time.Minute, 100, 50, 10 * time.Minute, true},
		{time.Hour, 20 * time.Minute, 10, 50, 40 * time.Minute, true},
		{0, 20 * time.Minute, 10, 5, 10 * time.Minute, true},
		{0, 20 * time.Minute, 0, 0, 0, false},
	}
	for _, c := range cases {
		got, known, of := timeLeft(c.max, c.elapsed, c.done, c.left)
		if got != c.want || known != c.known || of == "" {
			t.Errorf("timeLeft(%s, %s, %d, %d) = %s %v %q, want %s %v", c.max, c.elapsed, c.done, c.left, got, known, of, c.want, c.known)
		}
	}
}

// TestRunReleasesNodesWhoseRunExited: in a `run:` job that destroys its
// nodes at the end and runs nothing else on them, a node whose run has
// exited is collected and destroyed while the others still run, with or
// without a cull policy; never when the task says auto_destroy: false,
// nor when the node still runs other sessions of the job.
func TestRunReleasesNodesWhoseRunExited(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		job     jobfile.Job
		release bool
	}{
		{"run", jobfile.Job{Run: "hash", AutoDestroy: true}, true},
		{"auto_destroy false", jobfile.Job{Run: "hash"}, false},
		{"other sessions", jobfile.Job{Run: "hash", AutoDestroy: true, Sessions: []jobfile.Session{{Name: "w", Command: "serve"}}}, false},
		{"no run", jobfile.Job{AutoDestroy: true, Sessions: []jobfile.Session{{Name: "w", Command: "serve"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			ids := e.rent("rel", 3)
			r := &runner{d: e.deps(&startNodes{e: e}), o: Options{Job: &tc.job}, rec: &Record{ID: "rel", State: StateRunning,
				AutoDestroy: tc.job.AutoDestroy, Results: "out", LocalDir: filepath.Join(t.TempDir(), "rel"), RunIDs: ids, Started: true}}
			for i, id := range ids {
				r.nodes = append(r.nodes, Node{ID: id, Name: fmt.Sprint("C.", id), Rank: i})
			}
			r.repl = newReplacer(ctx, r)
			defer r.repl.stop(ctx)
			judged := r.judging(ctx)
			if (judged != nil) != tc.release {
				t.Fatalf("judge %v, want one: %v", judged != nil, tc.release)
			}
			// The first node's run exited; the others run on.
			running := map[int64]bool{ids[1]: true, ids[2]: true}
			if judged != nil {
				judged(ctx, wire.Snapshot{}, running)
			} else {
				r.releaseExited(ctx, running, wire.Totals{})
			}
			destroyed := map[int64]bool{}
			for _, s := range e.mkt.State() {
				destroyed[s.ID] = s.Destroyed
			}
			var released []int64
			collected := 0
			e.mu.Lock()
			for _, ev := range e.events {
				switch ev := ev.(type) {
				case Released:
					released = append(released, ev.IDs...)
				case Collected:
					collected += ev.Nodes
				}
			}
			e.mu.Unlock()
			if !tc.release {
				if destroyed[ids[0]] || len(released) > 0 || len(r.nodes) != 3 {
					t.Errorf("released %v (destroyed: %v), nodes %v: want none released", released, destroyed[ids[0]], r.nodes)
				}
				return
			}
			if !destroyed[ids[0]] || !slices.Equal(released, ids[:1]) || collected != 1 {
				t.Errorf("released %v, destroyed %v, collected %d node(s): want %d collected and destroyed", released, destroyed, collected, ids[0])
			}
			if destroyed[ids[1]] || destroyed[ids[2]] || len(r.nodes) != 2 {
				t.Errorf("destroyed %v, nodes %v: the nodes still running must stay", destroyed, r.nodes)
			}
		})
	}
}

// TestReleaseKeepsANodeWhoseCollectFailed: a finished node whose results
// did not come back is not destroyed while the others run. It stays in
// the job's nodes (the finish collects again before it destroys), and is
// not collected again on every look at the run.
func TestReleaseKeepsANodeWhoseCollectFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ids := e.rent("rel", 3)
	nodes := &startNodes{e: e, failCollect: map[int64]bool{ids[0]: true}}
	job := jobfile.Job{Run: "hash", AutoDestroy: true}
	r := &runner{d: e.deps(nodes), o: Options{Job: &job}, rec: &Record{ID: "rel", State: StateRunning,
		AutoDestroy: true, Results: "out", LocalDir: filepath.Join(t.TempDir(), "rel"), RunIDs: ids, Started: true}}
	for i, id := range ids {
		r.nodes = append(r.nodes, Node{ID: id, Name: fmt.Sprint("C.", id), Rank: i})
	}
	r.repl = newReplacer(ctx, r)
	defer r.repl.stop(ctx)
	running := map[int64]bool{ids[1]: true, ids[2]: true}
	r.releaseExited(ctx, running, wire.Totals{})
	r.releaseExited(ctx, running, wire.Totals{}) // a second look at the run
	for _, s := range e.mkt.State() {
		if s.Destroyed {
			t.Errorf("instance %d destroyed: a node whose results did not come back must stay", s.ID)
		}
	}
	if len(r.nodes) != 3 {
		t.Errorf("nodes %v: the node must stay for the finish's collect", r.nodes)
	}
	var missed []int64
	e.mu.Lock()
	for _, ev := range e.events {
		switch ev := ev.(type) {
		case Released:
			t.Errorf("released %v", ev.IDs)
		case CollectMissed:
			missed = append(missed, ev.ID)
		}
	}
	e.mu.Unlock()
	if !slices.Equal(missed, ids[:1]) {
		t.Errorf("collect missed on %v, want %v said once", missed, ids[:1])
	}
	nodes.mu.Lock()
	defer nodes.mu.Unlock()
	if got := nodes.collects[ids[0]]; got != 1 {
		t.Errorf("collected %d times before the finish, want once", got)
	}
}
