package cli

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

const launchQuery = "rentable=True inet_down>=200 cpu_cores_effective>16 geolocation notin [CN,HK] dph_total<=5"

func TestLaunchParksReleasesAndSummarises(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.speed = "300" // a simulated minute in 0.2 s of wall time; the quorum ends it early
	r := e.ok("launch", "--count", "6", "--deadline", "60m", "--park", "--fleet", "f1", "--json", "-n", launchQuery)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	sum := decode[map[string]any](t, lines[len(lines)-1])
	if sum["event"] != "summary" {
		t.Fatalf("last JSON line is not the summary: %s", lines[len(lines)-1])
	}
	for _, k := range []string{"asked", "ready", "replaced", "failed", "boot_spend", "dph_total"} {
		if _, ok := sum[k]; !ok {
			t.Errorf("summary lacks %q: %v", k, sum)
		}
	}
	if sum["asked"] != 6.0 || sum["ready"] != 6.0 {
		t.Errorf("summary asked %v ready %v, want 6 and 6", sum["asked"], sum["ready"])
	}
	var parked, release bool
	if n := strings.Count(r.out, `"event":"summary"`); n != 1 {
		t.Errorf("%d summary lines, want exactly 1", n)
	}
	for _, l := range lines[:len(lines)-1] {
		ev := decode[map[string]any](t, l)
		parked = parked || ev["event"] == "parked"
		release = release || ev["event"] == "release"
	}
	if !parked || !release {
		t.Errorf("events show parked=%v release=%v, want both", parked, release)
	}
	ls := decode[[]map[string]any](t, e.ok("ls", "--fleet", "f1", "--json").out)
	running := 0
	for _, in := range ls {
		if in["state"] == "running" {
			running++
		}
	}
	if running != 6 {
		t.Errorf("fleet f1 has %d running instances, want 6: %v", running, ls)
	}
	// The summary names the fleet and exactly the instances that run.
	if sum["fleet"] != "f1" || sum["min_ready"] != 6.0 {
		t.Errorf("summary fleet %v min_ready %v, want f1 and 6", sum["fleet"], sum["min_ready"])
	}
	readyIDs := map[float64]bool{}
	for _, id := range sum["ready_ids"].([]any) {
		readyIDs[id.(float64)] = true
	}
	for _, in := range ls {
		if in["state"] == "running" && !readyIDs[in["id"].(float64)] {
			t.Errorf("running instance %v missing from ready_ids %v", in["id"], sum["ready_ids"])
		}
	}
	if len(readyIDs) != 6 {
		t.Errorf("ready_ids %v, want 6 distinct ids", sum["ready_ids"])
	}
	// The same fleet name cannot be launched twice; --resume continues it.
	if r := e.fails("launch", "--count", "2", "--fleet", "f1", "-n", launchQuery); !strings.Contains(r.err, "--resume") {
		t.Errorf("second launch into f1: stderr %q", r.err)
	}
	e.ok("destroy", "--all", "--yes")
}

func TestLaunchRefusesCapsBeforeRenting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.fails("launch", "--count", "20", "--deadline", "10m", "--budget", "0.01", "--fleet", "cap", "-n", launchQuery)
	if !strings.Contains(r.err, "--budget") {
		t.Errorf("budget refusal: stderr %q should name --budget and the figures", r.err)
	}
	r = e.fails("launch", "--count", "20", "--max-dph", "0.05", "--fleet", "cap2", "-n", launchQuery)
	if !strings.Contains(r.err, "--max-dph") {
		t.Errorf("max-dph refusal: stderr %q", r.err)
	}
	if n := len(decode[[]map[string]any](t, e.ok("ls", "--all", "--json").out)); n != 0 {
		t.Errorf("refused launches rented %d instances", n)
	}
	for _, bad := range [][]string{
		{"launch", "--count", "0"},
		{"launch", "--count", "1001"},
		{"launch", "--count", "5", "--min-ready", "6"},
		{"launch", "--env", "NOEQUALS"},
		{"launch", "--session", "bad name:cmd"},
		{"launch", "--on-interrupt", "explode"},
	} {
		if r := e.run(bad...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", bad, r.code, r.err)
		}
	}
	if r := e.fails("launch", "--resume", "nosuchfleet"); r.code == 0 {
		t.Errorf("resume of an unknown fleet succeeded")
	}
}

func TestLaunchFromSavedRanking(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.speed = "300"
	saved := filepath.Join(e.home, "results.json")
	e.ok("search", "--by", "vcpu", "--all", "--save", saved, "--json", "-n", launchQuery)
	ranked := decode[[]map[string]any](t, e.ok("search", "--by", "vcpu", "--all", "--json", "-n", launchQuery).out)
	r := e.ok("launch", "--from", saved, "--count", "3", "--deadline", "30m", "--fleet", "fromfile", "--image", "ubuntu:22.04", "--json")
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if sum := decode[map[string]any](t, lines[len(lines)-1]); sum["ready"] != 3.0 {
		t.Fatalf("summary %v, want 3 ready", sum)
	}
	// The instances come from the saved ranking: each offer is in it.
	inRanking := map[float64]bool{}
	for _, o := range ranked {
		inRanking[o["id"].(float64)] = true
	}
	for _, in := range decode[[]map[string]any](t, e.ok("ls", "--fleet", "fromfile", "--json").out) {
		if !inRanking[in["offer_id"].(float64)] {
			t.Errorf("instance %v runs offer %v, which is not in the saved ranking", in["id"], in["offer_id"])
		}
	}
	if r := e.fails("launch", "--from", filepath.Join(e.home, "missing.json"), "--count", "1"); r.code != 2 {
		t.Errorf("--from a missing file: exit %d, want 2", r.code)
	}
	os.WriteFile(filepath.Join(e.home, "bad.json"), []byte(`{"not": "a list"}`), 0o644)
	if r := e.fails("launch", "--from", filepath.Join(e.home, "bad.json"), "--count", "1"); !strings.Contains(r.err, "search --save") {
		t.Errorf("--from a malformed file: stderr %q", r.err)
	}
	e.ok("destroy", "--all", "--yes")
}

// TestLaunchOutcomeDoesNotDependOnLoad runs one launch spec twice on the
// realistic market, the second time with every core saturated: the market
// moves only while the launch waits, so the ready count is the same
// within 2% (goroutine order may still differ by an instance).
func TestLaunchOutcomeDoesNotDependOnLoad(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("two 40-instance launches")
	}
	ready := func(load bool) float64 {
		e := newEnv(t)
		if load {
			// Other processes take every core, as on a shared machine.
			var spinners []*exec.Cmd
			for range runtime.NumCPU() {
				c := exec.Command("/bin/sh", "-c", "while :; do :; done")
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				spinners = append(spinners, c)
			}
			defer func() {
				for _, c := range spinners {
					c.Process.Kill()
					c.Wait()
				}
			}()
		}
		start := time.Now()
		defer func() { t.Logf("load=%v launch took %v", load, time.Since(start)) }()
		r := e.run("--sim-faults", "realistic", "launch", "--by", "vcpu", "--count", "40", "--deadline", "10m",
			"--park", "--fleet", "load", "--json")
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		sum := decode[map[string]any](t, lines[len(lines)-1])
		if sum["event"] != "summary" {
			t.Fatalf("no summary (exit %d): %s\n%s", r.code, r.out, r.err)
		}
		return sum["ready"].(float64)
	}
	idle, loaded := ready(false), ready(true)
	t.Logf("ready of 40: %v idle, %v with every core busy", idle, loaded)
	if math.Abs(idle-loaded) > math.Max(1, 0.02*40) {
		t.Errorf("ready %v on an idle machine, %v on a loaded one: the outcome depends on load", idle, loaded)
	}
}
