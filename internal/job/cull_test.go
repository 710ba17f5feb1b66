package job

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// TestCullerJudgesPerDollarAfterTheGrace: a node is culled only once it
// has reported for the grace period, and only when its mean metric per
// $/hr is under the share of the running nodes' median; a node whose run
// ended is neither judged nor counted in the median; a node is silent
// only while its agent reports its sessions running; and with several
// metrics and none named nothing is judged (said once).
func TestCullerJudgesPerDollarAfterTheGrace(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var unjudged []string
	c := &culler{p: jobfile.Cull{Below: 0.5, After: 5 * time.Minute}, job: "j", nodes: map[int64]*reports{},
		unjudge: func(why string) { unjudged = append(unjudged, why) },
		inst: map[int64]store.Instance{
			1: {ID: 1, MachineID: 11, DPHTotal: 1}, 2: {ID: 2, MachineID: 12, DPHTotal: 1}, 3: {ID: 3, MachineID: 13, DPHTotal: 2},
			4: {ID: 4, MachineID: 14, DPHTotal: 1}, // delivers a fifth of the median per dollar
			5: {ID: 5, MachineID: 15, DPHTotal: 4}, // as much as the others, at 4x the price: a quarter
			6: {ID: 6, MachineID: 16, DPHTotal: 1}, // its run ended, slow: not judged, not in the median
			7: {ID: 7, MachineID: 17, DPHTotal: 1}, // reports no metric: delivers nothing
			8: {ID: 8, MachineID: 18, DPHTotal: 1}, // probing its machine: its run has not started
			9: {ID: 9, MachineID: 19, DPHTotal: 1}, // its agent has not reported yet
		}}
	rates := map[int64]float64{1: 100, 2: 110, 3: 190, 4: 20, 5: 100, 6: 1}
	probing := true // node 8
	snap := func(at time.Time, metrics func(id int64) map[string]float64) wire.Snapshot {
		s := wire.Snapshot{At: at}
		for id := int64(1); id <= 8; id++ {
			n := wire.Node{Node: fmt.Sprint("n", id), InstanceID: id, State: "alive", LastSeen: at}
			switch id {
			case 7:
			case 8:
				if probing {
					n.Stage = wire.StageProbe
				}
			default:
				n.Metrics = metrics(id)
			}
			s.Nodes = append(s.Nodes, n)
		}
		return s
	}
	one := func(id int64) map[string]float64 { return map[string]float64{"keys_per_s": rates[id]} }
	running := map[int64]bool{1: true, 2: true, 3: true, 4: true, 5: true, 7: true, 8: true, 9: true}
	for m := range 5 {
		if got := c.observe(snap(t0.Add(time.Duration(m)*time.Minute), one), running); len(got) != 0 {
			t.Fatalf("minute %d, within the grace: culled %+v", m, got)
		}
	}
	got := c.observe(snap(t0.Add(5*time.Minute), one), running)
	var ids []int64
	for _, k := range got {
		ids = append(ids, k.ID)
	}
	if !slices.Equal(ids, []int64{7, 4, 5}) {
		t.Fatalf("after the grace culled %v, want [7 4 5]", ids)
	}
	if k := got[0]; k.MachineID != 17 || k.Reports != 0 || k.Over != 5*time.Minute || !strings.Contains(k.Line(), "no report of keys_per_s in 5m0s") {
		t.Errorf("silent node's cull %+v: %s", k, k.Line())
	}
	// The median of 100, 110, 95, 20, 25 per $/hr is 95.
	if k := got[1]; k.MachineID != 14 || k.Metric != "keys_per_s" || k.Median != 95 || k.PerDPH != 20 || k.Reports != 6 || k.Over != 5*time.Minute {
		t.Errorf("cull %+v", k)
	}
	// Node 8's sessions start: its silence counts from then (the culled
	// have left the run).
	probing = false
	delete(running, 4)
	delete(running, 5)
	delete(running, 7)
	for m := 6; m <= 11; m++ {
		got := c.observe(snap(t0.Add(time.Duration(m)*time.Minute), one), running)
		if want := m == 11; (len(got) == 1 && got[0].ID == 8) != want || len(got) > 1 {
			t.Fatalf("minute %d, node 8 silent since minute 6: culled %+v", m, got)
		}
	}
	// Several metrics, none named: nothing judged, said once.
	running = map[int64]bool{1: true, 2: true, 3: true, 4: true, 5: true}
	c2 := &culler{p: jobfile.Cull{Below: 0.5, After: time.Minute}, job: "j", nodes: map[int64]*reports{}, inst: c.inst,
		unjudge: func(why string) { unjudged = append(unjudged, why) }}
	two := func(id int64) map[string]float64 {
		return map[string]float64{"keys_per_s": rates[id], "keys": 1000 * rates[id]}
	}
	for m := range 10 {
		if got := c2.observe(snap(t0.Add(time.Duration(m)*time.Minute), two), running); len(got) != 0 {
			t.Fatalf("two metrics, none named: culled %+v", got)
		}
	}
	if len(unjudged) != 1 || !strings.Contains(unjudged[0], "metric: NAME") {
		t.Errorf("said %q, want once that a metric must be named", unjudged)
	}
	// Named, it judges.
	c2.p.Metric = "keys_per_s"
	c2.observe(snap(t0.Add(20*time.Minute), two), running)
	if got := c2.observe(snap(t0.Add(22*time.Minute), two), running); len(got) != 2 {
		t.Errorf("metric named: culled %+v, want 2", got)
	}
}

// TestCullDoesNotRaiseTheBar: the median a node is held against keeps the
// nodes already culled at their mean, so that culling the worst does not
// make the next-worst fall under the share (all but the best culled one
// by one, seen in the demo before: 11 of 20).
func TestCullDoesNotRaiseTheBar(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	inst := map[int64]store.Instance{}
	rates := map[int64]float64{1: 100, 2: 100, 3: 100, 4: 30, 5: 30, 6: 45}
	running := map[int64]bool{}
	for id := range rates {
		inst[id] = store.Instance{ID: id, MachineID: 10 + id, DPHTotal: 1}
		running[id] = true
	}
	c := &culler{p: jobfile.Cull{Below: 0.5, After: time.Minute}, job: "j", nodes: map[int64]*reports{}, inst: inst, unjudge: func(string) {}}
	var culled []int64
	for m := range 10 {
		at := t0.Add(time.Duration(m) * time.Minute)
		s := wire.Snapshot{At: at}
		for id := range running {
			s.Nodes = append(s.Nodes, wire.Node{Node: fmt.Sprint("n", id), InstanceID: id, State: "alive", LastSeen: at,
				Metrics: map[string]float64{"keys_per_s": rates[id]}})
		}
		for _, k := range c.observe(s, running) {
			culled = append(culled, k.ID)
			delete(running, k.ID)
		}
	}
	// The median of 100, 100, 100, 30, 30, 45 is 72.5: 45 is 62% of it,
	// and stays; held against the three 100s left, it would be culled.
	if slices.Sort(culled); !slices.Equal(culled, []int64{4, 5}) {
		t.Errorf("culled %v, want [4 5]", culled)
	}
}

// TestUpCullsTheNodeThatDeliversLeastPerDollar is the cull policy on real
// parts (the simulated market, the store, the coordinator): of four
// nodes, the one delivering a fifth of the others' keys per $/hr is
// destroyed once it has reported for the grace period, while the job
// runs on; its machine goes on the bad-host list with the figures, and
// the cull is an event and a line of the report. Without the policy
// nothing is destroyed before the end, and the fleet's keys per dollar
// is lower.
func TestUpCullsTheNodeThatDeliversLeastPerDollar(t *testing.T) {
	t.Parallel()
	withCull, culls := runCullJob(t, cullJob{policy: &jobfile.Cull{Below: 0.5, After: 5 * time.Minute}})
	without, none := runCullJob(t, cullJob{})
	if len(none) != 0 || len(without.rep.Culls) != 0 {
		t.Fatalf("without a cull policy: culls %+v", without.rep.Culls)
	}
	if len(culls) != 1 || len(withCull.rep.Culls) != 1 || withCull.rep.Culls[0].ID != withCull.slow {
		t.Fatalf("culls %+v (report %+v), want instance %d", culls, withCull.rep.Culls, withCull.slow)
	}
	k := culls[0]
	if k.Share >= 0.5 || k.Over < 5*time.Minute || k.Error != "" || k.Metric != "keys_per_s" {
		t.Errorf("cull %+v", k)
	}
	// Destroyed mid-run: it ran less than half as long as the others.
	for _, n := range withCull.rep.Nodes {
		if n.ID != k.ID && 2*withCull.running(k.ID) > n.Running {
			t.Errorf("culled instance %d ran %.0fs, instance %d %.0fs: not destroyed mid-run", k.ID, withCull.running(k.ID), n.ID, n.Running)
		}
	}
	hosts, err := withCull.st.BadHosts(context.Background(), withCull.now)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 1 || hosts[0].MachineID != k.MachineID || !strings.Contains(hosts[0].Reason, "culled by job cull") ||
		!strings.Contains(hosts[0].Reason, "keys_per_s") {
		t.Errorf("bad hosts %+v, want machine %d culled with its figures", hosts, k.MachineID)
	}
	var b bytes.Buffer
	withCull.rep.WriteTotals(&b)
	if !strings.Contains(b.String(), fmt.Sprintf("culled instance %d", k.ID)) {
		t.Errorf("the report's text leaves out the cull:\n%s", b.String())
	}
	with, wo := withCull.keysPerDollar(), without.keysPerDollar()
	t.Logf("keys per dollar: %.4g with cull, %.4g without (%+.0f%%)", with, wo, 100*(with/wo-1))
	if with <= 1.15*wo {
		t.Errorf("keys per dollar %.4g with cull, %.4g without: want over 15%% more", with, wo)
	}
}

// cullRun is one run of the cull job.
type cullRun struct {
	*env
	rep  *Report
	rec  *Record
	slow int64
	now  time.Time
	ids  []int64
	dph  map[int64]float64
	keys map[int64]float64 // keys each node delivered (its rate over the time it reported)
	// started are the nodes the job prepared beside the launch (its
	// replacements), in order.
	started []int64
	// placed are the replacements as their go marker was written (their
	// names and ranks), and where its log went.
	placed  []Node
	logDirs []string
	// ranked are the run's nodes by rank.
	ranked []int64
	// rented is every instance the fleet had when the run began, gone
	// ones (failed boots, a launch's spares) included.
	rented map[int64]bool
}

func (r cullRun) running(id int64) float64 {
	for _, n := range r.rep.Nodes {
		if n.ID == id {
			return n.Running
		}
	}
	return 0
}

func (r cullRun) keysPerDollar() float64 {
	var keys float64
	for _, v := range r.keys {
		keys += v
	}
	return keys / r.rep.Total
}

// cullJob is how a cull job runs: its policy and max_duration, and
// whether its fleet comes from a launch (which a replacement needs: the
// launch's stored offers and spec) rather than four plain rentals.
type cullJob struct {
	policy      *jobfile.Cull
	maxDuration time.Duration
	launched    bool
	// byValue ranks the launch's offers by $/hr per advertised unit,
	// cheapest first, as a search by vCPU or GPU does: every offer left
	// after the launch is then dearer per unit than the fleet's.
	byValue bool
}

// runCullJob runs a job on four nodes whose agents report keys_per_s each
// 10 s of market time, the dearest node a fifth of the others' per $/hr,
// under the cull policy; it returns the run and its cull events. A node
// the job prepares itself (a replacement) reports from its go marker on,
// as a median node.
func runCullJob(t *testing.T, cj cullJob) (cullRun, []Cull) {
	e := newEnv(t)
	ctx := context.Background()
	startedAt := e.clock.Now()
	var ids []int64
	if cj.launched {
		ids = e.launch("cull", 4, cj.byValue)
	} else {
		ids = e.rent("cull", 4)
	}
	run := cullRun{env: e, ids: ids, dph: map[int64]float64{}, keys: map[int64]float64{}, rented: map[int64]bool{}}
	all, err := e.st.Instances(ctx, store.InstanceFilter{Fleet: "cull", IncludeGone: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range all {
		run.rented[in.ID] = true
	}
	ins, err := e.st.Instances(ctx, store.InstanceFilter{Fleet: "cull"})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		run.dph[in.ID] = in.DPHTotal
		// The slow node is the dearest: what it costs is what a cull saves.
		if run.slow == 0 || in.DPHTotal > run.dph[run.slow] {
			run.slow = in.ID
		}
	}
	creds := map[int64]string{}
	for _, id := range ids {
		creds[id] = e.enrollAs("cull", id, fmt.Sprint("node-", id))
	}
	var mu sync.Mutex
	// Every node delivers 1e6 keys/s per $/hr, the slow one 2e5.
	rate := func(id int64) float64 {
		mu.Lock()
		defer mu.Unlock()
		if id == run.slow {
			return 2e5 * run.dph[id]
		}
		return 1e6 * run.dph[id]
	}
	culled := map[int64]bool{}
	nodes := &startNodes{e: e}
	d := e.deps(nodes)
	// The replacement's launch waits on a clock that also takes some wall
	// time (as the simulator's paced clock does), so that its rents land
	// before its deadline.
	grower := &growLauncher{m: &fleet.Manager{P: e.client, S: e.st, Clock: pacedClock{e.clock}, Log: slog.New(slog.DiscardHandler)}}
	if cj.launched {
		d.Launcher = grower
	}
	events := d.Events
	stop, stopped := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.Events = func(ev Event) {
		switch ev := ev.(type) {
		case Cull:
			mu.Lock()
			culled[ev.ID] = true
			mu.Unlock()
		case Ended:
			// The run is over: no more keys (the nodes are destroyed next).
			once.Do(func() { close(stop) })
			<-stopped
		}
		events(ev)
	}
	d.Coord, d.Poll = e.cs, time.Millisecond
	go func() { // the market's time goes on, and the agents report
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if grower.growing.Load() {
				// A replacement's launch moves the market's time by its
				// own waits, as the job's launch did.
				continue
			}
			e.clock.Advance(10 * time.Second)
			reporting := append([]int64(nil), ids...)
			for _, id := range nodes.startedIDs() {
				if creds[id] == "" {
					in, err := e.st.Instance(ctx, id)
					if err != nil {
						continue
					}
					mu.Lock()
					run.dph[id] = in.DPHTotal
					mu.Unlock()
					if creds[id], err = e.tryEnroll("cull", id, fmt.Sprint("node-", id)); err != nil {
						continue
					}
				}
				reporting = append(reporting, id)
			}
			for _, id := range reporting {
				mu.Lock()
				gone := culled[id]
				mu.Unlock()
				if gone {
					continue
				}
				r := rate(id)
				mu.Lock()
				run.keys[id] += 10 * r
				mu.Unlock()
				e.heartbeat(creds[id], wire.Heartbeat{Fleet: "cull", Node: fmt.Sprint("node-", id), InstanceID: id, SentAt: e.clock.Now(),
					Metrics: map[string]float64{"keys_per_s": r}})
			}
		}
	}()
	jf := &jobfile.Job{Sessions: []jobfile.Session{{Name: "w", Command: "work"}}, MaxDuration: cmp.Or(cj.maxDuration, 30*time.Minute),
		AutoDestroy: true, Cull: cj.policy}
	r := &runner{d: d, o: Options{Job: jf}, rec: &Record{ID: "cull", State: StateRunning, StartedAt: startedAt, AutoDestroy: true,
		LocalDir: t.TempDir(), RunIDs: ids, Started: true}}
	// Ranked so that the slow node is never rank 0, the rank a
	// replacement selected alone gets.
	ranked := slices.Clone(ids)
	if ranked[0] == run.slow {
		ranked[0], ranked[1] = ranked[1], ranked[0]
	}
	run.ranked = ranked
	for i, id := range ranked {
		r.nodes = append(r.nodes, Node{ID: id, Name: fmt.Sprint("C.", id), Rank: i})
	}
	rep, err := r.watchAndFinish(ctx)
	once.Do(func() { close(stop) })
	<-stopped
	if err != nil {
		t.Fatal(err)
	}
	run.rep, run.rec, run.now, run.started = rep, r.rec, e.clock.Now(), nodes.startedIDs()
	nodes.mu.Lock()
	run.placed, run.logDirs = slices.Clone(nodes.placed), slices.Clone(nodes.logDirs)
	nodes.mu.Unlock()
	var out []Cull
	e.mu.Lock()
	for _, ev := range e.events {
		if k, ok := ev.(Cull); ok {
			out = append(out, k)
		}
	}
	e.mu.Unlock()
	return run, out
}

// launch launches n running instances into fleet id through the launch
// engine, from the env's offers in their order, or with byValue cheapest
// per advertised core first: its spec and offers are stored with the
// fleet, as a job's are.
func (e *env) launch(id string, n int, byValue bool) []int64 {
	e.t.Helper()
	var cands []market.Ranked
	for _, o := range e.offers {
		cands = append(cands, market.Ranked{Offer: o, Score: 1})
	}
	if byValue {
		_, units := market.Quantity("vcpu")
		perUnit := func(c market.Ranked) float64 { return c.DPHTotal / units(&c.Offer) }
		slices.SortStableFunc(cands, func(a, b market.Ranked) int { return cmp.Compare(perUnit(a), perUnit(b)) })
	}
	sum, err := launch.Run(context.Background(), e.m, launch.Spec{Fleet: id, Count: n, Backfill: true,
		Create: provider.CreateRequest{Image: "ubuntu:22.04", Disk: 20, Runtype: "ssh"}}, cands, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(sum.ReadyIDs) != n {
		e.t.Fatalf("launch: %d ready of %d", len(sum.ReadyIDs), n)
	}
	return sum.ReadyIDs
}

// pacedClock is stepClock taking a ten-thousandth of each wait in wall
// time.
type pacedClock struct{ m *clock.Manual }

func (c pacedClock) Now() time.Time { return c.m.Now() }
func (c pacedClock) Sleep(ctx context.Context, d time.Duration) error {
	time.Sleep(d / 10000)
	c.m.Advance(d)
	return ctx.Err()
}

// growLauncher rents a job's replacements with the launch engine, as the
// command line's does; growing says a Grow runs.
type growLauncher struct {
	m       *fleet.Manager
	growing atomic.Bool
}

func (*growLauncher) Candidates(context.Context) ([]market.Ranked, Estimate, error) {
	return nil, Estimate{}, errors.New("not launching")
}
func (*growLauncher) Launch(context.Context, []market.Ranked) (launch.Summary, error) {
	return launch.Summary{}, errors.New("not launching")
}
func (*growLauncher) Resume(context.Context) (launch.Summary, error) {
	return launch.Summary{}, errors.New("not launching")
}
func (l *growLauncher) Grow(ctx context.Context, add int, accept func(market.Ranked) bool) (launch.Summary, error) {
	l.growing.Store(true)
	defer l.growing.Store(false)
	return launch.Grow(ctx, l.m, "cull", add, nil, launch.Checks{}, accept)
}
func (l *growLauncher) GrowOffers(ctx context.Context) (launch.Offers, error) {
	return launch.GrowOffers(ctx, l.m, "cull")
}
func (*growLauncher) Running()    {}
func (*growLauncher) RunStarted() {}

// startNodes are the job's node operations without SSH: a node is
// selected only when the store has it running with an address, and one
// whose start script ran (its go marker) starts reporting.
type startNodes struct {
	e       *env
	mu      sync.Mutex
	started []int64
	placed  []Node
	logDirs []string
	// failCollect: nodes whose collect fails (a dropped connection);
	// collects counts each node's collects.
	failCollect map[int64]bool
	collects    map[int64]int
}

func (n *startNodes) startedIDs() []int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.started)
}

func (n *startNodes) Select(ctx context.Context, ids []int64) ([]Node, error) {
	var out []Node
	for i, id := range ids {
		in, err := n.e.st.Instance(ctx, id)
		if err != nil {
			return nil, err
		}
		if in.State != provider.StateRunning || in.SSHHost == "" {
			return nil, fmt.Errorf("instance %d is %s without an SSH route", id, in.State)
		}
		// Ranked as the selection is, from 0.
		out = append(out, Node{ID: id, Name: fmt.Sprint("C.", id), Rank: i})
	}
	return out, nil
}

func (n *startNodes) rows(nodes []Node) []StepResult {
	var out []StepResult
	for _, nd := range nodes {
		out = append(out, StepResult{ID: nd.ID, Node: nd.Name})
	}
	return out
}

func (n *startNodes) Sync(_ context.Context, nodes []Node, _, _ string) (int, []StepResult, error) {
	return 1, n.rows(nodes), nil
}

func (n *startNodes) Exec(_ context.Context, nodes []Node, script, logDir string) ([]StepResult, error) {
	if script == startScript {
		n.mu.Lock()
		n.started = append(n.started, ids(nodes)...)
		n.placed = append(n.placed, nodes...)
		n.logDirs = append(n.logDirs, logDir)
		n.mu.Unlock()
	}
	return n.rows(nodes), nil
}

func (n *startNodes) Collect(_ context.Context, nodes []Node, _, _ string) ([]StepResult, error) {
	rows := n.rows(nodes)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.collects == nil {
		n.collects = map[int64]int{}
	}
	for i := range rows {
		n.collects[rows[i].ID]++
		if n.failCollect[rows[i].ID] {
			rows[i].Error = "ssh: connection reset by peer"
		}
	}
	return rows, nil
}

// tryEnroll is enrollAs for another goroutine than the test's: it
// returns what went wrong.
func (e *env) tryEnroll(fleetName string, id int64, name string) (string, error) {
	bootstrap, _, err := e.db.FleetTokens(context.Background(), fleetName)
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(wire.EnrollRequest{Fleet: fleetName, InstanceID: id, Node: name})
	req, _ := http.NewRequest(http.MethodPost, e.coord.URL+wire.PathEnroll, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+bootstrap)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("enroll: %s", resp.Status)
	}
	var rep wire.EnrollReply
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return "", err
	}
	return rep.Token, nil
}

// enrollAs trades fleet's bootstrap token for instance id's credential as
// node name.
func (e *env) enrollAs(fleetName string, id int64, name string) string {
	e.t.Helper()
	bootstrap, _, err := e.db.FleetTokens(context.Background(), fleetName)
	if err != nil {
		e.t.Fatal(err)
	}
	var rep wire.EnrollReply
	e.post(bootstrap, wire.PathEnroll, wire.EnrollRequest{Fleet: fleetName, InstanceID: id, Node: name}, &rep)
	return rep.Token
}

// heartbeat sends hb as an agent would; an answer other than 2xx (a node
// just destroyed) is the agent's to bear, not the test's.
func (e *env) heartbeat(credential string, hb wire.Heartbeat) {
	b, _ := json.Marshal(hb)
	req, _ := http.NewRequest(http.MethodPost, e.coord.URL+wire.PathHeartbeat, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+credential)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}
