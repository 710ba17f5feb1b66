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

func runLaunch(t *testing.T, bin string, seed, count int, by string) launchFigures {
	t.Helper()
	cmd := exec.Command(bin, "--data-dir", dataDir(t), "--sim-seed", strconv.Itoa(seed),
		"launch", "--by", by, "--count", strconv.Itoa(count), "--deadline", "10m", "--park", "--json")
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
// node for the launch alone, with one hour of each node kept, and per
// vCPU-hour. By default it runs a reduced form (seed 1, 60 nodes, two
// launches of a few seconds each); the figures are
//
//	VASTFLEET_USEFUL_BENCH_SEEDS=1,2,3,4,5 VASTFLEET_USEFUL_BENCH_COUNT=300 \
//	  go test ./cmd/vastfleet -run TestUsefulRankingBench -v -timeout 30m
func TestUsefulRankingBench(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: two launches per seed")
	}
	seeds, count := []int{1}, 60
	if v := os.Getenv("VASTFLEET_USEFUL_BENCH_SEEDS"); v != "" {
		seeds = nil
		for _, f := range strings.Split(v, ",") {
			s, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("VASTFLEET_USEFUL_BENCH_SEEDS=%q: want seeds like 1,2,3", v)
			}
			seeds = append(seeds, s)
		}
	}
	if v := os.Getenv("VASTFLEET_USEFUL_BENCH_COUNT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("VASTFLEET_USEFUL_BENCH_COUNT=%q: want a node count", v)
		}
		count = n
	}
	bin := binary(t)
	var sumV, sumU launchFigures
	for _, seed := range seeds {
		v := runLaunch(t, bin, seed, count, "vcpu")
		u := runLaunch(t, bin, seed, count, "useful")
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
		// Ranking by what a useful node costs must not cost more per
		// ready node than list price does, at launch.
		if u.perReady() > v.perReady() {
			t.Errorf("seed %d: --by useful spent $%.4f per ready node, more than --by vcpu's $%.4f", seed, u.perReady(), v.perReady())
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
