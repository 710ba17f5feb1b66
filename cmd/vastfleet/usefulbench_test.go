package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// launchFigures is what one `launch --json` run cost and got.
type launchFigures struct {
	Ready     int     `json:"ready"`
	Asked     int     `json:"asked"`
	Rented    int     `json:"rented"`
	Failed    int     `json:"failed"`
	BootSpend float64 `json:"boot_spend"` // bandwidth included
	DPH       float64 `json:"dph_total"`  // the ready fleet's $/hr
	VCPU      float64 `json:"vcpu"`
}

// perReady is the launch's spend per ready node; perKept adds an hour of
// each ready node's price (the node kept through a one-hour job), and
// perVCPUHour is that per ready vCPU.
func (l launchFigures) perReady() float64 { return l.BootSpend / float64(max(l.Ready, 1)) }
func (l launchFigures) perKept() float64  { return (l.BootSpend + l.DPH) / float64(max(l.Ready, 1)) }
func (l launchFigures) perVCPUHour() float64 {
	return (l.BootSpend + l.DPH) / max(l.VCPU, 1)
}

func runLaunch(t *testing.T, bin string, seed, count int, by, query string) launchFigures {
	t.Helper()
	args := []string{"--data-dir", dataDir(t), "--sim-seed", strconv.Itoa(seed),
		"launch", "--by", by, "--count", strconv.Itoa(count), "--deadline", "10m", "--park", "--json"}
	if query != "" {
		args = append(args, query)
	}
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		t.Fatalf("seed %d --by %s: %v\n%s", seed, by, err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Event string `json:"event"`
			launchFigures
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Event == "summary" {
			return line.launchFigures
		}
	}
	t.Fatalf("seed %d --by %s: no summary line\n%s", seed, by, stderr.String())
	return launchFigures{}
}

// TestUsefulRankingBench compares the user's launch ranked --by useful
// with the same launch ranked --by vcpu (cheapest $/vCPU first), on the
// default simulated market with the realistic faults: dollars per ready
// node for the launch alone, with one hour of each node kept (the issue's
// dollars per ready-and-kept node, which it asserts), and per vCPU-hour.
// By default it runs seed 1 (two 300-node launches, about a minute; at 60
// nodes seed 1 is the one seed of 1-4 where --by useful fell short, 55
// ready: its parked nodes waited for stragglers and lost GPUs at the
// release); the figures are
//
//	VASTFLEET_USEFUL_BENCH_SEEDS=1,2,3,4,5 VASTFLEET_USEFUL_BENCH_COUNT=300 \
//	  go test ./cmd/vastfleet -run TestUsefulRankingBench -v -timeout 30m
//
// The user's launch gives no query (launch.DefaultFilter, no bound on
// the node's size); VASTFLEET_USEFUL_BENCH_QUERY='inet_down>=200
// reliability>0.95 geolocation notin [CN,HK] cpu_cores_effective>16'
// launches with one that bounds it.
func TestUsefulRankingBench(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: two launches per seed")
	}
	seeds := benchSeeds(t, "VASTFLEET_USEFUL_BENCH_SEEDS")
	count := benchCount(t, "VASTFLEET_USEFUL_BENCH_COUNT", 300)
	query := os.Getenv("VASTFLEET_USEFUL_BENCH_QUERY")
	bin := binary(t)
	var sumV, sumU launchFigures
	for _, seed := range seeds {
		v := runLaunch(t, bin, seed, count, "vcpu", query)
		u := runLaunch(t, bin, seed, count, "useful", query)
		t.Logf("seed %d, %d nodes: ready %d/%d (vcpu) %d/%d (useful); $/ready node %.4f → %.4f (%+.1f%%); "+
			"with 1 h kept %.4f → %.4f (%+.1f%%); $/vCPU-hour %.5f → %.5f (%+.1f%%); failed %d → %d of %d → %d rented",
			seed, count, v.Ready, v.Asked, u.Ready, u.Asked,
			v.perReady(), u.perReady(), pct(u.perReady(), v.perReady()),
			v.perKept(), u.perKept(), pct(u.perKept(), v.perKept()),
			v.perVCPUHour(), u.perVCPUHour(), pct(u.perVCPUHour(), v.perVCPUHour()),
			v.Failed, u.Failed, v.Rented, u.Rented)
		// The comparison holds only at the same ready share.
		if v.Ready < count*95/100 || u.Ready < count*95/100 {
			t.Errorf("seed %d: ready %d (vcpu) and %d (useful) of %d: want at least 95%% each", seed, v.Ready, u.Ready, count)
		}
		// Ranking by what a node ready and kept costs must not cost more
		// per node ready and kept than list price does. (The launch's
		// spend alone is not what it weighs: it pays a little more boot
		// waste for a much cheaper hour.)
		if u.perKept() > v.perKept() {
			t.Errorf("seed %d: --by useful spent $%.4f per node ready and kept 1 h, more than --by vcpu's $%.4f", seed, u.perKept(), v.perKept())
		}
		for _, p := range []struct{ sum, one *launchFigures }{{&sumV, &v}, {&sumU, &u}} {
			p.sum.Ready += p.one.Ready
			p.sum.BootSpend += p.one.BootSpend
			p.sum.DPH += p.one.DPH
			p.sum.VCPU += p.one.VCPU
		}
	}
	t.Logf("all seeds: $/ready node %+.1f%%, with 1 h kept %+.1f%%, $/vCPU-hour %+.1f%% (--by useful against --by vcpu)",
		pct(sumU.perReady(), sumV.perReady()), pct(sumU.perKept(), sumV.perKept()), pct(sumU.perVCPUHour(), sumV.perVCPUHour()))
}

func pct(a, b float64) float64 { return (a/b - 1) * 100 }

// benchSeeds reads a bench's seeds from env ("1,2,3"); seed 1 without it.
func benchSeeds(t *testing.T, env string) []int {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		return []int{1}
	}
	var seeds []int
	for _, f := range strings.Split(v, ",") {
		s, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("%s=%q: want seeds like 1,2,3", env, v)
		}
		seeds = append(seeds, s)
	}
	return seeds
}

// benchCount reads a bench's node count from env; def without it.
func benchCount(t *testing.T, env string, def int) int {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a node count", env, v)
	}
	return n
}

// demoFigures is what one demo job cost and got: its whole cost (failed
// boots and spares included) and the nodes that ran the job through.
type demoFigures struct {
	Total float64 `json:"total"`
	Ran   int     `json:"nodes_ran"`
	Nodes []struct {
		Ran bool `json:"ran"`
	} `json:"nodes"`
}

// perNode is the job's dollars per node that was ready and kept through it.
func (d demoFigures) perNode() float64 { return d.Total / float64(max(d.Ran, 1)) }

func runDemo(t *testing.T, bin string, seed, count int, by string) demoFigures {
	t.Helper()
	data := dataDir(t)
	cmd := exec.Command(bin, "--data-dir", data, "--sim-seed", strconv.Itoa(seed),
		"demo", "--by", by, "--count", strconv.Itoa(count), "--seconds", "2", "--json")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		// Partial (a node lost on a loaded machine): the report stands,
		// and the ready share below says how partial.
		t.Logf("seed %d --by %s: demo partial", seed, by)
	} else if err != nil {
		t.Fatalf("seed %d --by %s: %v\n%s", seed, by, err, tail(stderr.String(), 3000))
	}
	var d demoFigures
	if err := json.Unmarshal(out, &d); err != nil || d.Total <= 0 {
		t.Fatalf("seed %d --by %s: no cost report (%v):\n%s\n%s", seed, by, err, out, tail(stderr.String(), 3000))
	}
	return d
}

// TestUsefulRankingDemoBench compares the demo's job (its task file as
// `vastfleet demo` writes it: cpu_cores_effective>=4, a single-threaded
// hash search on each node, 45-minute deadline) ranked by: useful with
// the same job ranked by: vcpu, on the default simulated market with its
// realistic faults: the job's whole cost (failed boots and spares
// included) per node that ran it through. By default seed 1 with 16
// nodes (two demos of about half a minute each); the figures are
//
//	VASTFLEET_USEFUL_DEMO_SEEDS=1,2,3,4,5 VASTFLEET_USEFUL_DEMO_COUNT=50 \
//	  go test ./cmd/vastfleet -run TestUsefulRankingDemoBench -v -timeout 30m
func TestUsefulRankingDemoBench(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two demos per seed")
	}
	needOnstartTools(t)
	seeds := benchSeeds(t, "VASTFLEET_USEFUL_DEMO_SEEDS")
	count := benchCount(t, "VASTFLEET_USEFUL_DEMO_COUNT", 16)
	bin := binary(t)
	var sumV, sumU demoFigures
	for _, seed := range seeds {
		v := runDemo(t, bin, seed, count, "vcpu")
		u := runDemo(t, bin, seed, count, "useful")
		t.Logf("seed %d, %d nodes: ran %d/%d (vcpu) %d/%d (useful); $ per node ready and kept %.5f → %.5f (%+.1f%%); rented %d → %d",
			seed, count, v.Ran, count, u.Ran, count, v.perNode(), u.perNode(), pct(u.perNode(), v.perNode()), len(v.Nodes), len(u.Nodes))
		if v.Ran < count*95/100 || u.Ran < count*95/100 {
			t.Errorf("seed %d: %d (vcpu) and %d (useful) of %d ran the job: want at least 95%% each", seed, v.Ran, u.Ran, count)
		}
		if u.perNode() > v.perNode() {
			t.Errorf("seed %d: by: useful spent $%.5f per node, more than by: vcpu's $%.5f", seed, u.perNode(), v.perNode())
		}
		sumV.Total, sumV.Ran = sumV.Total+v.Total, sumV.Ran+v.Ran
		sumU.Total, sumU.Ran = sumU.Total+u.Total, sumU.Ran+u.Ran
	}
	t.Logf("all seeds: $ per node ready and kept %.5f → %.5f (%+.1f%%, by: useful against by: vcpu)",
		sumV.perNode(), sumU.perNode(), pct(sumU.perNode(), sumV.perNode()))
}
