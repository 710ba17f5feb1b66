package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/localmarket"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

func needAgentTools(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the agent and runs a fleet")
	}
	for _, tool := range []string{"curl", "sha256sum", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the agent's onstart needs %s", tool)
		}
	}
}

// TestUpRunsAFleetJobEndToEnd: a task file with a workdir, setup, a run
// command that prints a finding and writes a result file; up rents,
// syncs, sets up, runs, collects, destroys and reports.
func TestUpRunsAFleetJobEndToEnd(t *testing.T) {
	t.Parallel()
	needAgentTools(t)
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "work.sh"), []byte(`mkdir -p results
echo "{\"metric\":\"things_per_s\",\"value\":10}"
echo "{\"found\":{\"rank\":\"$VASTFLEET_NODE_RANK\",\"setup\":\"$(cat setup-ran)\"}}"
echo "node $VASTFLEET_NODE_RANK of $VASTFLEET_NUM_NODES" > results/out.txt
`), 0o644)
	file := filepath.Join(dir, "job.yaml")
	os.WriteFile(file, []byte(`name: t
query: "rentable=True num_gpus=1 dph_total<1"
count: 2
image: ubuntu:22.04
workdir: `+src+`
setup: echo yes > setup-ran
run: sh work.sh
results: /workspace/project/results
max_duration: 2h
`), 0o644)
	res := filepath.Join(dir, "out")
	r := e.ok("up", file, "--agent-bin", agentBin, "--results", res)
	if !strings.Contains(r.out, "cost report for job t-") || !strings.Contains(r.out, "instances still live 0") {
		t.Errorf("report:\n%s\nstderr:\n%s", r.out, r.err)
	}
	outs, _ := filepath.Glob(filepath.Join(res, "t-*", "*", "out.txt"))
	if len(outs) != 2 {
		t.Errorf("collected %v, want out.txt from 2 nodes\nstderr:\n%s", outs, r.err)
	}
	finds, _ := filepath.Glob(filepath.Join(res, "t-*", "findings.jsonl"))
	if len(finds) != 1 || strings.Count(readFile(t, finds[0]), `\"setup\":\"yes\"`)+strings.Count(readFile(t, finds[0]), `"setup":"yes"`) != 2 {
		t.Errorf("findings %v", finds)
	}
	ls := e.ok("ls", "--json")
	if strings.Contains(ls.out, `"state":"running"`) {
		t.Errorf("instances left: %s", ls.out)
	}
	st := e.ok("status")
	if !strings.Contains(st.out, "done") {
		t.Errorf("status:\n%s", st.out)
	}
}

// TestUpChecksTheTaskFileBeforeRenting: a workdir that is not there fails
// up before anything is rented (it used to fail once a node had booted).
func TestUpChecksTheTaskFileBeforeRenting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "job.yaml")
	os.WriteFile(file, []byte(`name: t
query: "rentable=True num_gpus=1 dph_total<1"
count: 1
image: ubuntu:22.04
workdir: not-here
run: echo hi
`), 0o644)
	r := e.fails("up", file, "--results", filepath.Join(dir, "out"))
	if r.code != 2 || !strings.Contains(r.err, "not-here") || !strings.Contains(r.err, "nothing was rented") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.err)
	}
	if ls := decode[[]map[string]any](t, e.ok("ls", "--json").out); len(ls) != 0 {
		t.Errorf("rented %v", ls)
	}
}

// TestStatusShowsTheMarketsSpend: status counts a running job's spend to
// the market's now, read from the process that serves the market (up
// does, while its job runs), not to this machine's: the simulated market
// runs ahead of it, and status showed a stale cent.
func TestStatusShowsTheMarketsSpend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("launch", "--count", "2", "--deadline", "30m", "--fleet", "spendy", "--image", "ubuntu:22.04", "-n", launchQuery)
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(e.home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	recs := &job.Records{Store: st, Dir: filepath.Join(e.home, "jobs")}
	if err := recs.Save(ctx, &job.Record{ID: "spendy", State: job.StateRunning, StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	// The market is served, as up serves it, an hour on from the launch.
	e.ok("sim", "stop")
	mc := clock.NewManual(time.Now())
	mkt, err := sim.Open(filepath.Join(e.home, "sim"), sim.Config{APIKey: sim.DefaultAPIKey, Clock: mc})
	if err != nil {
		t.Fatal(err)
	}
	mc.Advance(time.Hour)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- mkt.ServeListener(sctx, ln) }()
	defer func() { stop(); <-served; mkt.Close() }()
	os.WriteFile(filepath.Join(e.home, "sim", localmarket.URLFile), []byte("http://"+ln.Addr().String()+"\n"), 0o600)

	rows := decode[[]jobStatus](t, e.ok("status", "spendy", "--json").out)
	if len(rows) != 1 || rows[0].Live != 2 {
		t.Fatalf("status %+v", rows)
	}
	// The market runs on between the launch and sim stop, at 3000× on a
	// loaded machine for hours, so the yardstick is the market's own
	// ledger, not an hour's rate.
	var ledger float64
	for _, in := range mkt.State() {
		ledger += in.Spend
	}
	if r := rows[0]; r.Spent < 0.9*r.DPH || math.Abs(r.Spent-ledger) > 0.1*ledger {
		t.Errorf("spent $%.4f at $%.4f/hr an hour on; the market's ledger says $%.4f: want at least an hour's and within 10%% of the ledger", r.Spent, r.DPH, ledger)
	}
}

// TestUpValidatesItemResults: a job whose task file asks for 2-of-2
// replication and a verify command runs every item on two machines, an
// honest fleet sees no rejection, and the report gives each host's
// validated results.
func TestUpValidatesItemResults(t *testing.T) {
	t.Parallel()
	needAgentTools(t)
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	dir := t.TempDir()
	file := filepath.Join(dir, "job.yaml")
	os.WriteFile(file, []byte(`name: v
query: "rentable=True num_gpus=1 dph_total<1"
count: 3
image: ubuntu:22.04
items: 1..6
run: x={item}; echo $((x * 2))
validate: {replicas: 2, quorum: 2}
verify: read x; [ "$x" = "$(( VASTFLEET_ITEM * 2 ))" ]
max_duration: 2h
`), 0o644)
	r := e.ok("up", file, "--agent-bin", agentBin, "--results", filepath.Join(dir, "out"), "--json")
	var rep job.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("report %q: %v\nstderr:\n%s", r.out, err, r.err)
	}
	if rep.ItemsDone != 6 || rep.ItemsLeft != 0 || rep.Live != 0 {
		t.Fatalf("report: %d done, %d left, %d live\nstderr:\n%s", rep.ItemsDone, rep.ItemsLeft, rep.Live, r.err)
	}
	validated := 0
	for _, h := range rep.Hosts {
		if h.Rejected != 0 || h.Caught != "" {
			t.Errorf("honest host %+v was rejected", h)
		}
		validated += h.Validated
	}
	if validated != 12 {
		t.Errorf("hosts %+v: %d validated results, want 12 (6 items on 2 machines each)", rep.Hosts, validated)
	}
}

// TestUpCatchesLyingHosts: on a market where some machines' operators lie
// with the agent's own credential (wrong results, forged findings, results
// for items never leased, heartbeats as other nodes), a job that
// validates by 2-of-2 replication keeps only right results and names every
// lying machine that ran for it.
func TestUpCatchesLyingHosts(t *testing.T) {
	t.Parallel()
	needAgentTools(t)
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	dir := t.TempDir()
	file := filepath.Join(dir, "job.yaml")
	os.WriteFile(file, []byte(`name: liars
query: "rentable=True num_gpus=1 dph_total<1"
count: 5
image: ubuntu:22.04
items: 1..12
run: x={item}; sleep 1; echo $((x * 2))
validate: {replicas: 2, quorum: 2}
max_duration: 2h
`), 0o644)
	res := filepath.Join(dir, "out")
	r := e.ok("--sim-liars", "0.25", "up", file, "--agent-bin", agentBin, "--results", res, "--json")
	var rep job.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("report %q: %v\nstderr:\n%s", r.out, err, r.err)
	}
	if rep.ItemsDone != 12 || rep.Live != 0 {
		t.Fatalf("report: %d done, %d left, %d live\nstderr:\n%s", rep.ItemsDone, rep.ItemsLeft, rep.Live, r.err)
	}
	// Every kept result is the right one.
	items, _ := filepath.Glob(filepath.Join(res, "liars-*", "items.jsonl"))
	if len(items) != 1 {
		t.Fatalf("items.jsonl: %v", items)
	}
	kept := 0
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, items[0])), "\n") {
		var it job.ItemLine
		if err := json.Unmarshal([]byte(line), &it); err != nil {
			t.Fatal(err)
		}
		x, _ := strconv.Atoi(it.Value)
		if strings.TrimSpace(it.StdoutTail) != strconv.Itoa(2*x) {
			t.Errorf("item %s kept %q from %s, want %d", it.Value, it.StdoutTail, it.Node, 2*x)
		}
		kept++
	}
	if kept != 12 {
		t.Errorf("%d results kept, want 12", kept)
	}
	// The market's own account of who lied, beside the job's.
	e.ok("sim", "stop")
	mkt, err := sim.Open(filepath.Join(e.home, "sim"), sim.Config{Faults: sim.Faults{Liars: 0.25}})
	if err != nil {
		t.Fatal(err)
	}
	liars := mkt.LyingMachines()
	mkt.Close()
	caught := map[int64]bool{}
	for _, h := range rep.Hosts {
		if h.Caught != "" {
			caught[h.MachineID] = true
		}
	}
	ran := map[int64]bool{}
	for _, h := range rep.Hosts {
		ran[h.MachineID] = h.Validated+h.Rejected+h.Unchecked > 0
	}
	lied := 0
	for _, m := range liars {
		if !ran[m] {
			continue // rented, but never reported a result
		}
		lied++
		if !caught[m] {
			t.Errorf("lying machine %d not caught: %+v", m, rep.Hosts)
		}
	}
	for m := range caught {
		if !slices.Contains(liars, m) {
			t.Errorf("honest machine %d caught: %+v", m, rep.Hosts)
		}
	}
	if lied == 0 {
		t.Fatalf("no lying machine ran for the job (lying machines rented: %v): the test proves nothing on this seed", liars)
	}
	t.Logf("%d lying machines ran for the job, %d caught; hosts %+v", lied, len(caught), rep.Hosts)
}

// TestUpLaunchesFromTheProbesRanking: a task file's probe runs on one
// instance of each of the top machine types before the launch, and the
// job rents the type that measured best per dollar, not the listing's
// first; a type whose probe failed is never rented. A probe that passes
// nowhere stops the job before its launch.
func TestUpLaunchesFromTheProbesRanking(t *testing.T) {
	t.Parallel()
	needAgentTools(t)
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	dir := t.TempDir()
	// The listing's first type measures 1 unit/s, the second 5000, the
	// third fails.
	probe := `case $VASTFLEET_NODE_RANK in 0) echo 1;; 1) echo 5000;; *) exit 3;; esac`
	task := func(probe string) string {
		file := filepath.Join(dir, "job.yaml")
		os.WriteFile(file, []byte(`name: t
query: "rentable=True num_gpus=1 dph_total<1"
count: 1
image: ubuntu:22.04
run: "true"
max_duration: 1h
probe: {command: '`+probe+`', top: 3, timeout: 30s}
`), 0o644)
		return file
	}
	r := e.ok("up", task(probe), "--agent-bin", agentBin, "--results", filepath.Join(dir, "out"))
	rows := probeRows(r.err)
	if len(rows) != 3 || !strings.Contains(r.err, "UNITS/$") {
		t.Fatalf("probe table rows %q\nstderr:\n%s", rows, r.err)
	}
	var best string
	for _, in := range decode[[]map[string]any](t, e.ok("ls", "--all", "--json").out) {
		if f, _ := in["fleet"].(string); strings.HasPrefix(f, "t-") {
			best = fmt.Sprint(in["gpu_name"])
		}
	}
	// The table's first row is the best per dollar: the type at 5000.
	if !strings.Contains(rows[0], "5000") || best == "" || !strings.Contains(rows[0], best) {
		t.Errorf("the job rented %q; the probe table:\n%s", best, strings.Join(rows, "\n"))
	}
	r = e.fails("up", task("exit 3"), "--agent-bin", agentBin, "--results", filepath.Join(dir, "out2"))
	if r.code != 2 || !strings.Contains(r.err, "passed on none of the 3 machine types") {
		t.Errorf("a probe that passes nowhere: exit %d\n%s", r.code, r.err)
	}
}

// probeRows are the probe table's rows in up's output.
func probeRows(out string) []string {
	var rows []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "RANK"):
			in = true
		case in && strings.HasPrefix(l, "the listing's"):
			return rows
		case in && strings.TrimSpace(l) != "":
			rows = append(rows, l)
		}
	}
	return rows
}
