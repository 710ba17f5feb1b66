package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestDemoCostMatchesTheBill: the demo (50 instances on the simulated
// marketplace with its realistic faults, launched parked, failed boots
// replaced, released together, run, collected, destroyed) reports the
// marketplace's charges beside its cost, and the two agree within $0.01
// per instance and to the cent in total; so does cost --reconcile run
// afterwards on the demo's data dir.
func TestDemoCostMatchesTheBill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	needOnstartTools(t)
	bin := binary(t)
	data := filepath.Join(t.TempDir(), "demo")
	stopMarketAtCleanup(t, data)
	cmd := exec.Command(bin, "--data-dir", data, "demo", "--seconds", "2", "--json")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		// Partial (a node lost on a loaded machine): the report stands.
		t.Logf("demo partial:\n%s", tail(stderr.String(), 1500))
	} else if err != nil {
		t.Fatalf("demo: %v\n%s\nstderr:\n%s", err, b, tail(stderr.String(), 4000))
	}
	var rep struct {
		Nodes     []json.RawMessage `json:"nodes"`
		Reconcile json.RawMessage   `json:"reconcile"`
		Error     string            `json:"reconcile_error"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || rep.Reconcile == nil {
		t.Fatalf("demo report without a reconciliation (%v, %s):\n%s", err, rep.Error, b)
	}
	r := checkReconciled(t, fmt.Sprintf("demo (%d instances in the report)", len(rep.Nodes)), rep.Reconcile)
	if len(r.Instances) != len(rep.Nodes) || len(r.Instances) < 50 {
		t.Errorf("%d instances reconciled, %d in the cost report", len(r.Instances), len(rep.Nodes))
	}
	after, err := exec.Command(bin, "--data-dir", data, "cost", "--reconcile", "--json").Output()
	if err != nil {
		t.Fatalf("cost --reconcile after the demo: %v", err)
	}
	checkReconciled(t, "cost --reconcile after the demo", after)
}

// TestLaunchWithStopsCostMatchesTheBill: a launch of interruptible
// instances (bids) on a market with realistic faults (failed boots,
// slow hosts, rival bids), a quarter of the fleet stopped by hand and
// half of those started again, the data dir watched meanwhile, then
// everything destroyed: the data dir's ledger and the simulator's charges
// agree within $0.01 per instance and to the cent in total. 40 instances in CI; the size:
//
//	VASTFLEET_RECONCILE_COUNT=300 go test ./cmd/vastfleet -run TestLaunchWithStopsCostMatchesTheBill -v -timeout 30m
func TestLaunchWithStopsCostMatchesTheBill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a launch")
	}
	count := 40
	if n, err := strconv.Atoi(os.Getenv("VASTFLEET_RECONCILE_COUNT")); err == nil && n > 0 {
		count = n
	}
	bin := binary(t)
	dir := t.TempDir()
	simAddr := freeAddr(t)
	simURL := "http://" + simAddr
	start(t, bin, "sim", "serve", "--addr", simAddr, "--faults", "realistic", "--time-scale", "60", "--state", filepath.Join(dir, "market"))
	eventually(t, "sim serve", 30*time.Second, func() bool {
		var v map[string]any
		return getJSON(simURL+"/sim/clock", "", &v) == nil
	})
	vf := func(args ...string) []string {
		return append([]string{"--data-dir", filepath.Join(dir, "data"), "--api-url", simURL}, args...)
	}
	run := func(args ...string) []byte {
		t.Helper()
		out, err := exec.Command(bin, vf(args...)...).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				t.Fatalf("vastfleet %v: %v\n%s\nstderr:\n%s", args, err, out, tail(string(ee.Stderr), 3000))
			}
			t.Fatalf("vastfleet %v: %v", args, err)
		}
		return out
	}
	t.Cleanup(func() { exec.Command(bin, vf("destroy", "--all", "--yes", "--force")...).Run() })
	run("launch", "--count", strconv.Itoa(count), "--fleet", "stops", "--bid", "min", "--deadline", "2h",
		"--image", "ubuntu:22.04", "-n", "rentable=True num_gpus=1 dph_total<1", "--json")
	var ls []struct {
		ID    int64  `json:"id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal(run("ls", "--json"), &ls); err != nil || len(ls) == 0 {
		t.Fatalf("ls after the launch: %v (%d instances)", err, len(ls))
	}
	var stop []string
	for i, in := range ls {
		if i%4 == 0 && in.State == "running" {
			stop = append(stop, strconv.FormatInt(in.ID, 10))
		}
	}
	// Between the steps the data dir is watched, as a running up or
	// coordinator watches it: reconcile back to back (under a simulated
	// minute apart at 60x unless the machine is loaded), so
	// that a change the marketplace makes by itself (a boot after a start,
	// an outbid) is dated within a minute. Unwatched, it is dated at the
	// listing that first shows it, and cost --reconcile names that stretch.
	watch := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			run("reconcile", "--json")
		}
	}
	watch(2 * time.Second)
	if len(stop) > 0 {
		run(append([]string{"stop"}, stop...)...)
	}
	watch(2 * time.Second)
	if len(stop) > 1 {
		run(append([]string{"start"}, stop[:len(stop)/2]...)...)
	}
	watch(2 * time.Second)
	// The realistic market fails some destroys (HTTP 500): destroy again,
	// as the error says to, until every one is confirmed.
	for try := 1; ; try++ {
		out, err := exec.Command(bin, vf("destroy", "--all", "--yes", "--force")...).CombinedOutput()
		if err == nil {
			break
		}
		if try == 5 {
			t.Fatalf("destroy --all, %d tries: %v\n%s", try, err, tail(string(out), 2000))
		}
		t.Logf("destroy --all, try %d: %v", try, err)
	}
	r := checkReconciled(t, fmt.Sprintf("launch of %d with %d stopped", count, len(stop)), run("cost", "--reconcile", "--json"))
	if len(r.Instances) < count {
		t.Errorf("%d instances reconciled, fewer than the %d launched", len(r.Instances), count)
	}
	// The bid watcher the launch started ends once nothing bids.
	eventually(t, "the bid watcher ends", 60*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "data", "bidwatch.log"))
		return strings.Contains(string(b), "bid watcher ends: no interruptible instance is kept")
	})
}

// TestUserLaunchCostMatchesTheBill: the user's own launch, as README and
// the issue give it (launch --count N --deadline 10m --park --by vcpu on
// the built-in simulator with its realistic faults: failed and slow boots
// replaced, hedges, surplus destroyed, the fleet parked and released
// together), left unwatched, then destroy --all: cost --reconcile agrees
// with the simulator's own charges within $0.01 per instance and to the
// cent in total. 40 instances, one seed and --park, in CI; the issue's
// size, each seed with and without --park:
//
//	VASTFLEET_RECONCILE_COUNT=300 VASTFLEET_RECONCILE_SEEDS=1,2,3 VASTFLEET_RECONCILE_NOPARK=1 \
//	  go test ./cmd/vastfleet -run TestUserLaunchCostMatchesTheBill -v -timeout 60m
func TestUserLaunchCostMatchesTheBill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a launch")
	}
	count := 40
	if n, err := strconv.Atoi(os.Getenv("VASTFLEET_RECONCILE_COUNT")); err == nil && n > 0 {
		count = n
	}
	seeds := []string{"1"}
	if v := os.Getenv("VASTFLEET_RECONCILE_SEEDS"); v != "" {
		seeds = strings.Split(v, ",")
	}
	parks := []bool{true}
	if os.Getenv("VASTFLEET_RECONCILE_NOPARK") != "" {
		parks = append(parks, false)
	}
	bin := binary(t)
	for _, seed := range seeds {
		for _, park := range parks {
			name := fmt.Sprintf("seed %s park %v", seed, park)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dir := filepath.Join(t.TempDir(), "data")
				stopMarketAtCleanup(t, dir)
				run := func(args ...string) []byte {
					t.Helper()
					out, err := exec.Command(bin, append([]string{"--data-dir", dir, "--sim-seed", seed}, args...)...).Output()
					if err != nil {
						stderr := ""
						if ee, ok := err.(*exec.ExitError); ok {
							stderr = tail(string(ee.Stderr), 3000)
						}
						t.Fatalf("vastfleet %v: %v\n%s\nstderr:\n%s", args, err, tail(string(out), 2000), stderr)
					}
					return out
				}
				args := []string{"launch", "--count", strconv.Itoa(count), "--deadline", "10m", "--by", "vcpu", "--fleet", "big", "--json"}
				if park {
					args = append(args, "--park")
				}
				run(args...)
				// The realistic market fails some destroys (HTTP 500): destroy
				// again, as the error says to, until every one is confirmed.
				for try := 1; ; try++ {
					out, err := exec.Command(bin, "--data-dir", dir, "destroy", "--all", "--fleet", "big", "--yes", "--force").CombinedOutput()
					if err == nil {
						break
					}
					if try == 5 {
						t.Fatalf("destroy --all, %d tries: %v\n%s", try, err, tail(string(out), 2000))
					}
					t.Logf("destroy --all, try %d: %v", try, err)
				}
				r := checkReconciled(t, fmt.Sprintf("launch of %d, %s", count, name), run("cost", "--reconcile", "--fleet", "big", "--json"))
				if len(r.Instances) < count {
					t.Errorf("%d instances reconciled, fewer than the %d launched", len(r.Instances), count)
				}
				for _, in := range r.Instances {
					if in.Live {
						t.Errorf("instance %d still live after destroy --all", in.ID)
					}
				}
			})
		}
	}
}
