package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// cullFigures is what one demo delivered for its cost.
type cullFigures struct {
	Total float64 `json:"total"`
	Nodes []struct {
		LastMetrics map[string]float64 `json:"last_metrics"`
	} `json:"nodes"`
	Culls []struct {
		Share       float64 `json:"share"`
		Replacement *struct {
			State string `json:"state"`
		} `json:"replacement"`
	} `json:"culls"`
}

// hashes is the fleet's hashes, each node's last count summed (as the
// demo's own hashes-per-dollar line counts them).
func (c cullFigures) hashes() float64 {
	var h float64
	for _, n := range c.Nodes {
		h += n.LastMetrics["hashes"]
	}
	return h
}

func (c cullFigures) perDollar() float64 { return c.hashes() / max(c.Total, 1e-9) }

// replaced counts the culls a replacement was rented for.
func (c cullFigures) replaced() int {
	n := 0
	for _, cu := range c.Culls {
		if cu.Replacement != nil && cu.Replacement.State == "replaced" {
			n++
		}
	}
	return n
}

func runCullDemo(t *testing.T, bin string, seed, count int, seconds, spoof string, cull bool) cullFigures {
	t.Helper()
	args := []string{"--data-dir", dataDir(t), "--sim-seed", strconv.Itoa(seed), "--sim-spoof", spoof,
		"--sim-capacity-scale", strconv.Itoa(120 * count), "demo", "--count", strconv.Itoa(count), "--seconds", seconds, "--json"}
	if cull {
		args = append(args, "--cull", cullBelow)
	}
	cmd := exec.Command(bin, args...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		t.Logf("seed %d cull=%v: demo partial", seed, cull)
	} else if err != nil {
		t.Fatalf("seed %d cull=%v: %v\n%s", seed, cull, err, tail(stderr.String(), 3000))
	}
	var c cullFigures
	if err := json.Unmarshal(out, &c); err != nil || c.Total <= 0 {
		t.Fatalf("seed %d cull=%v: no cost report (%v):\n%s\n%s", seed, cull, err, out, tail(stderr.String(), 3000))
	}
	return c
}

// cullBelow is the benchmark's cull policy: a node under 60% of the
// median per dollar. The short machines (--sim-spoof 0.3) have a quarter
// to half of the cores they list, so several deliver 45-55% of the median
// per dollar; at 0.5 even a cull that never paid for them would gain
// +12.6% on seed 11 (a 50-node run's own figures), under the goal, while
// the honest nodes of the ranked fleet deliver 70% of the median or more.
const cullBelow = "0.6"

// capacityModelHere says whether this computer lets the simulator run
// its capacity model (a writable cgroup v1 cpu controller).
func capacityModelHere() error {
	dir := filepath.Join("/sys/fs/cgroup/cpu", fmt.Sprintf("vastfleet-probe-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	return os.Remove(dir)
}

// TestCullDemoBench is the goal: the demo's fleet with a cull
// (`demo --cull 0.6`) delivers at least 15% more hashes per dollar than
// the same demo without, on the same seed. It needs what makes delivery
// per dollar differ from the listing: machines that truly have fewer
// cores than they advertise (--sim-spoof 0.3: a quarter to half of the
// cores on 30% of machines), each machine's workload at its true cores
// (the capacity model at 120 × count simulated cores to one of this
// computer's, which needs a writable cgroup v1 cpu
// controller), and a run long enough for a cull, judged after 3 minutes
// of reports, to pay back. By default one seed with 6 nodes for 20 s,
// which asserts only that the cull acts (the +15% needs the env's
// sizes); the figures are
//
//	VASTFLEET_CULL_DEMO_SEEDS=5,7,11 VASTFLEET_CULL_DEMO_COUNT=50 VASTFLEET_CULL_DEMO_SECONDS=60 \
//	  go test ./cmd/vastfleet -run TestCullDemoBench -v -timeout 60m
func TestCullDemoBench(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two demos per seed")
	}
	needOnstartTools(t)
	if err := capacityModelHere(); err != nil {
		t.Skipf("no capacity model on this computer: %v", err)
	}
	full := os.Getenv("VASTFLEET_CULL_DEMO_SEEDS") != ""
	seeds := benchSeeds(t, "VASTFLEET_CULL_DEMO_SEEDS")
	if !full {
		seeds = []int{5}
	}
	count := benchCount(t, "VASTFLEET_CULL_DEMO_COUNT", 6)
	seconds := os.Getenv("VASTFLEET_CULL_DEMO_SECONDS")
	if seconds == "" {
		seconds = "20"
	}
	bin := binary(t)
	var sumPlain, sumCull float64
	for i, seed := range seeds {
		// Alternate which runs first, so that a computer growing busier
		// favours neither.
		var plain, culled cullFigures
		if i%2 == 0 {
			plain = runCullDemo(t, bin, seed, count, seconds, "0.3", false)
			culled = runCullDemo(t, bin, seed, count, seconds, "0.3", true)
		} else {
			culled = runCullDemo(t, bin, seed, count, seconds, "0.3", true)
			plain = runCullDemo(t, bin, seed, count, seconds, "0.3", false)
		}
		gain := pct(culled.perDollar(), plain.perDollar())
		t.Logf("seed %d, %d nodes, %ss: %.4g hashes for $%.4f (%.4g/$) → with cull %.4g for $%.4f (%.4g/$): %+.1f%%, %d culled, %d replaced",
			seed, count, seconds, plain.hashes(), plain.Total, plain.perDollar(), culled.hashes(), culled.Total, culled.perDollar(), gain,
			len(culled.Culls), culled.replaced())
		if len(culled.Culls) == 0 {
			t.Errorf("seed %d: the cull culled nothing", seed)
		}
		// The goal is asserted where it is measured (the env's seeds and
		// sizes): the reduced run is too short for a cull to pay back.
		if full && gain < 15 {
			t.Errorf("seed %d: the cull gained %+.1f%% hashes per dollar, want at least +15%%", seed, gain)
		}
		sumPlain += plain.perDollar()
		sumCull += culled.perDollar()
	}
	t.Logf("all seeds: %+.1f%% hashes per dollar with the cull", pct(sumCull, sumPlain))
}
