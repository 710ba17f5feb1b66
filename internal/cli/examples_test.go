package cli

import (
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/store"
)

func examplesDir(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// example copies examples/NAME.yaml, with its workdir beside it and
// the given replacements (small counts, the simulator), into a temp dir.
func example(t *testing.T, name string, replace ...string) string {
	t.Helper()
	root := examplesDir(t)
	text := readFile(t, filepath.Join(root, name+".yaml"))
	if strings.Contains(text, "gpu: vast") {
		replace = append(replace, "gpu: vast", "gpu: sim")
	}
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(text, replace[i]) {
			t.Fatalf("examples/%s.yaml no longer says %q", name, replace[i])
		}
		text = strings.Replace(text, replace[i], replace[i+1], 1)
	}
	// The copy's workdir (relative, so the file's own) is the example's.
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, name), filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExampleSearchFleet runs examples/search.yaml on the simulator with
// 3 nodes instead of 300: parked launch, the search on every node, the
// findings kept, results collected, nothing left running.
func TestExampleSearchFleet(t *testing.T) {
	t.Parallel()
	needAgentTools(t)
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	file := example(t, "search", "count: 300", "count: 3", "min_ready: 270", "min_ready: 3",
		"run: sh search.sh 00000", "run: SEARCH_COUNT=150 sh search.sh 0")
	res := filepath.Join(t.TempDir(), "results")
	r := e.ok("up", file, "--agent-bin", agentBin, "--results", res, "--json")
	rep := decode[jobReport](t, r.out)
	if rep.Ran != 3 || rep.Live != 0 || rep.Findings == 0 || rep.Estimate <= 0 || rep.Total <= 0 {
		t.Errorf("report %+v\nstderr:\n%s", rep, r.err)
	}
	found, _ := filepath.Glob(filepath.Join(res, rep.Job, "*", "found.txt"))
	if len(found) != 3 {
		t.Errorf("found.txt from %d nodes, want 3", len(found))
	}
	if lines := strings.Count(readFile(t, filepath.Join(res, rep.Job, "findings.jsonl")), "\n"); int64(lines) != rep.Findings {
		t.Errorf("findings.jsonl has %d lines, the coordinator %d", lines, rep.Findings)
	}
}

// itemsRecordedOnce reads an items.jsonl and checks that items 0..n-1
// each have exactly one result in it; it returns the results.
func itemsRecordedOnce(t *testing.T, path string, n int) []itemLine {
	t.Helper()
	var out []itemLine
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(readFile(t, path)), "\n") {
		it := decode[itemLine](t, l)
		seen[it.Value]++
		out = append(out, it)
	}
	for i := 0; i < n; i++ {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("item %d recorded %d times, want once", i, c)
		}
	}
	return out
}

// TestExampleSweep runs examples/sweep.yaml through up (its workdir
// relative to the file): 40 items over 3 nodes, each recorded exactly
// once, the job over when the items are, every item's output file
// collected. The nodes are kept (auto_destroy: false), so `logs JOB`
// reads their session logs from another invocation, and `down JOB` ends
// them.
func TestExampleSweep(t *testing.T) {
	t.Parallel()
	needAgentTools(t)
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	file := example(t, "sweep", "count: 4", "count: 3", "items: 0..199", "items: 0..39",
		"max_duration: 2h", "max_duration: 2h\nauto_destroy: false")
	res := filepath.Join(t.TempDir(), "results")
	r := e.ok("up", file, "--agent-bin", agentBin, "--results", res, "--json")
	rep := decode[jobReport](t, r.out)
	if rep.ItemsDone != 40 || rep.ItemsLeft != 0 || rep.ItemsFailed != 0 || rep.Live < 3 || rep.Ran != 3 {
		t.Fatalf("report %+v\nstderr:\n%s", rep, r.err)
	}
	// Each item is credited to the instance that sent it, and each
	// instance's items per dollar is its items over its cost.
	credited := 0
	for _, n := range rep.Nodes {
		credited += n.ItemsDone
		if n.ItemsDone > 0 && (!n.Ran || n.Total <= 0 || math.Abs(n.ItemsPerDollar-float64(n.ItemsDone)/n.Total) > 1e-9) {
			t.Errorf("instance %d: %d items, $%v, %v items per dollar", n.ID, n.ItemsDone, n.Total, n.ItemsPerDollar)
		}
	}
	if credited != 40 {
		t.Errorf("%d items credited to instances, want 40", credited)
	}
	// The delivery summary covers the instances that delivered, each in
	// its hardware model's row.
	if d := rep.Delivery; d == nil || d.Instances == 0 || len(d.ByModel) == 0 {
		t.Errorf("delivery %+v", rep.Delivery)
	} else {
		inModels := 0
		for _, m := range d.ByModel {
			inModels += m.Instances
		}
		if inModels != d.Instances {
			t.Errorf("delivery: %d instances over the models, %d in all", inModels, d.Instances)
		}
	}
	for _, it := range itemsRecordedOnce(t, filepath.Join(res, rep.Job, "items.jsonl"), 40) {
		if it.ExitCode != 0 || !strings.Contains(it.StdoutTail, "item "+it.Value+": ") {
			t.Errorf("item %s: exit %d, output %q", it.Value, it.ExitCode, it.StdoutTail)
		}
	}
	files, _ := filepath.Glob(filepath.Join(res, rep.Job, "*", "item-*.txt"))
	if len(files) != 40 {
		t.Errorf("%d item files collected, want 40", len(files))
	}

	// status says what the job delivered for its money.
	type delivered struct {
		Spent          float64 `json:"spent"`
		ItemsDone      int     `json:"items_done"`
		ItemsPerDollar float64 `json:"items_per_dollar"`
	}
	st := decode[[]delivered](t, e.ok("status", rep.Job, "--json").out)
	if len(st) != 1 || st[0].ItemsDone != 40 || st[0].Spent <= 0 || math.Abs(st[0].ItemsPerDollar-40/st[0].Spent) > 0.1 {
		t.Errorf("status %+v: want 40 items and their number per dollar spent", st)
	}

	logs := decode[[]nodeLog](t, e.ok("logs", rep.Job, "--json").out)
	if len(logs) != 3 {
		t.Fatalf("logs of %d nodes, want 3: %+v", len(logs), logs)
	}
	done := 0
	for _, l := range logs {
		if l.Source != "sessions" || !strings.Contains(l.Log, "--- session run") {
			t.Errorf("node %s: %s log %q", l.Node, l.Source, l.Log)
		}
		done += strings.Count(l.Log, "\nitem ")
	}
	if done != 40 {
		t.Errorf("the run logs show %d items done, want 40", done)
	}
	one := e.ok("logs", rep.Job, "--node", "1", "--session", "run", "--tail", "2").out
	if !strings.HasPrefix(one, "==> "+rep.Job+"-node-1 ") || strings.Count(one, "\nitem ") != 1 || !strings.Contains(one, "every item is done") {
		t.Errorf("logs --node 1 --tail 2:\n%s", one)
	}
	if r := e.run("logs", rep.Job, "--node", "7"); r.code != 2 || !strings.Contains(r.err, "nodes 0..2") {
		t.Errorf("logs --node 7: exit %d, %s", r.code, r.err)
	}
	down := decode[jobReport](t, e.ok("down", rep.Job, "--no-collect", "--json").out)
	if down.Live != 0 {
		t.Errorf("after down, %d instances live", down.Live)
	}
}

// TestSweepSurvivesLostNodes is the fleet workflow's promise through up:
// 50 items on 5 nodes, one node's machine taken offline mid-run (20%),
// and still every item done exactly once, every finding kept, no
// instance left.
func TestSweepSurvivesLostNodes(t *testing.T) {
	t.Parallel()
	needAgentTools(t)
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	file := example(t, "sweep", "count: 4", "count: 5", "items: 0..199", "items: 0..29",
		"max_duration: 2h", "max_duration: 2h\nenv:\n  ROUNDS: \"20\"")
	res := filepath.Join(t.TempDir(), "results")
	done := make(chan result, 1)
	go func() { done <- e.run("up", file, "--agent-bin", agentBin, "--results", res, "--json") }()

	// Once some node has finished an item, its machine goes offline.
	hosts := filepath.Join(e.home, "sim", "hosts")
	var victim string
	for deadline := time.Now().Add(3 * time.Minute); victim == ""; time.Sleep(50 * time.Millisecond) {
		select {
		case r := <-done:
			t.Fatalf("up ended before any item was done: exit %d\n%s", r.code, r.err)
		default:
		}
		filepath.WalkDir(hosts, func(p string, d fs.DirEntry, err error) error {
			if err == nil && victim == "" && strings.HasPrefix(d.Name(), "item-") {
				rel, _ := filepath.Rel(hosts, p)
				victim = strings.Split(rel, string(filepath.Separator))[0]
			}
			return nil
		})
		if time.Now().After(deadline) {
			t.Fatal("no item was done in 3 minutes")
		}
	}
	url, err := os.ReadFile(filepath.Join(e.home, "sim", "served-url"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(strings.TrimSpace(string(url))+"/sim/offline/"+victim, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("taking instance %s offline: %d %s", victim, resp.StatusCode, body)
	}

	var r result
	select {
	case r = <-done:
	case <-time.After(5 * time.Minute):
		t.Fatal("up did not finish within 5 minutes of losing a node")
	}
	rep := decode[jobReport](t, r.out)
	if rep.ItemsDone != 30 || rep.ItemsLeft != 0 || rep.ItemsFailed != 0 || rep.Live != 0 {
		t.Fatalf("exit %d, report %+v\nstderr:\n%s", r.code, rep, r.err)
	}
	itemsRecordedOnce(t, filepath.Join(res, rep.Job, "items.jsonl"), 30)
	// The lost node is named from the listing, not waited out over SSH.
	if !strings.Contains(r.err, "collecting from instance "+victim+": the host is offline") {
		t.Errorf("up did not say the offline node was not collected:\n%s", r.err)
	}
	if rep.Findings > 0 {
		if lines := strings.Count(readFile(t, filepath.Join(res, rep.Job, "findings.jsonl")), "\n"); int64(lines) != rep.Findings {
			t.Errorf("findings.jsonl has %d lines, the coordinator %d", lines, rep.Findings)
		}
	}
}

// TestExampleFinetuneRunsOnTheDefaultMarket: examples/finetune.yaml as
// written picks no marketplace, so `vastfleet up examples/finetune.yaml`
// runs on the default simulator instead of asking for a vast.ai key and a
// public address.
func TestExampleFinetuneRunsOnTheDefaultMarket(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"finetune", "search", "sweep"} {
		jf, err := jobfile.Load(filepath.Join(examplesDir(t), name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if jf.Market != "" {
			t.Errorf("examples/%s.yaml selects market %q: the README runs it on the default simulator", name, jf.Market)
		}
	}
}

// TestExampleFinetune runs examples/finetune.yaml on the simulator: the
// planner's best-value option rented, the workdir synced before setup,
// train.py run, its result collected, the instance destroyed, and the
// report set against the planner's estimate.
func TestExampleFinetune(t *testing.T) {
	t.Parallel()
	needAgentTools(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("train.py needs python3")
	}
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	// As written: the README's command on the default simulator.
	file := example(t, "finetune")
	res := filepath.Join(t.TempDir(), "results")
	r := e.ok("up", file, "--agent-bin", agentBin, "--results", res, "--json")
	rep := decode[jobReport](t, r.out)
	if rep.Ran != 1 || rep.Live != 0 || rep.Findings != 1 || !strings.Contains(rep.EstimateOf, "planner's option") || rep.Estimate <= 0 {
		t.Errorf("report %+v\nstderr:\n%s", rep, r.err)
	}
	if !strings.Contains(r.err, "best value") {
		t.Errorf("the plan's options were not shown:\n%s", r.err)
	}
	got, _ := filepath.Glob(filepath.Join(res, rep.Job, "*", "adapter.txt"))
	if len(got) != 1 {
		t.Errorf("adapter.txt collected from %d nodes, want 1\nstderr:\n%s", len(got), r.err)
	}
	checkRanAnnounced(t, e, r.err, rep)
}

// checkRanAnnounced holds issue 22's promise: the job runs on the offer
// the planner announced ("renting option N ... (offer ID)"), and every
// rental of the job (hedges and replacements too) is the announced GPU.
func checkRanAnnounced(t *testing.T, e *env, stderr string, rep jobReport) {
	t.Helper()
	m := regexp.MustCompile(`renting option \d+ \([^)]*\): (\d+)x (.+?) at \$([0-9.]+)/hr \(offer (\d+)\)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no announced option with its offer in:\n%s", stderr)
	}
	gpu, offer := m[2], m[4]
	st, err := store.Open(t.Context(), filepath.Join(e.home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ins, err := st.Instances(t.Context(), store.InstanceFilter{Fleet: rep.Job, IncludeGone: true})
	if err != nil {
		t.Fatal(err)
	}
	ran := map[int64]bool{}
	for _, n := range rep.Nodes {
		ran[n.ID] = n.Ran
	}
	ranOn := 0
	for _, in := range ins {
		if in.GPUName != gpu {
			t.Errorf("instance %d (offer %d) is %dx %s, not the announced %s: a rental outside the accepted option", in.ID, in.OfferID, in.NumGPUs, in.GPUName, gpu)
		}
		if ran[in.ID] {
			ranOn++
			if strconv.FormatInt(in.OfferID, 10) != offer {
				t.Errorf("the job ran on offer %d (%s at $%.3f/hr), announced offer %s (%s at $%s/hr)", in.OfferID, in.GPUName, in.DPHTotal, offer, gpu, m[3])
			}
		}
	}
	if ranOn != 1 {
		t.Errorf("the job ran on %d instances of %d rented, want 1\nstderr:\n%s", ranOn, len(ins), stderr)
	}
}
