package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// vfJSON runs the binary and decodes its JSON output.
func vfJSON(t *testing.T, bin string, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("vastfleet %s: %v\n%s\nstderr:\n%s", strings.Join(args, " "), err, b, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("vastfleet %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

// TestUpDetachThenStatusLogsDown: up --detach returns once the job runs,
// leaving a background up that holds the coordinator (and the simulated
// market); status, logs and down, each its own process, see and end the
// job: down has the background up collect, destroy and report, and
// nothing is left running.
func TestUpDetachThenStatusLogsDown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a fleet")
	}
	needOnstartTools(t)
	bin := binary(t)
	dir := t.TempDir()
	stopMarketAtCleanup(t, filepath.Join(dir, "data"))
	file := filepath.Join(dir, "job.yaml")
	// The run outlasts the test's checks; down ends it.
	os.WriteFile(file, []byte(`name: bg
query: "rentable=True num_gpus=1 dph_total<1"
count: 2
image: ubuntu:22.04
run: echo "started on rank $VASTFLEET_NODE_RANK"; sleep 300
`), 0o644)
	vf := func(args ...string) []string {
		return append([]string{"--data-dir", filepath.Join(dir, "data"), "--sim-faults", "none", "--sim-speed", "120"}, args...)
	}
	var up struct {
		Job       string `json:"job"`
		State     string `json:"state"`
		Dashboard string `json:"dashboard"`
		PID       int    `json:"pid"`
	}
	vfJSON(t, bin, &up, vf("up", file, "--detach", "--json", "--results", filepath.Join(dir, "out"))...)
	t.Cleanup(func() {
		// Should the test fail half-way, the background up still ends,
		// and with it the nodes' processes: down first, kill at last.
		exec.Command(bin, vf("down", up.Job, "--no-collect")...).Run()
		if p, err := os.FindProcess(up.PID); err == nil {
			p.Kill()
		}
	})
	if up.State != "running" || up.Dashboard == "" || up.PID <= 0 {
		t.Fatalf("up --detach: %+v", up)
	}
	var st []struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Live  int    `json:"instances_live"`
		Up    bool   `json:"up_running"`
	}
	vfJSON(t, bin, &st, vf("status", up.Job, "--json")...)
	if len(st) != 1 || st[0].State != "running" || st[0].Live < 2 || !st[0].Up {
		t.Fatalf("status: %+v", st)
	}
	var logs []struct {
		Log string `json:"log"`
	}
	// The run starts on the nodes a moment after up reports it started.
	for i := 0; ; i++ {
		vfJSON(t, bin, &logs, vf("logs", up.Job, "--json")...)
		if len(logs) == 2 && strings.Contains(logs[0].Log, "started on rank") && strings.Contains(logs[1].Log, "started on rank") {
			break
		}
		if i == 100 {
			t.Fatalf("logs: %+v", logs)
		}
	}
	var rep struct {
		Job  string `json:"job"`
		Ran  int    `json:"nodes_ran"`
		Live int    `json:"instances_live"`
	}
	vfJSON(t, bin, &rep, vf("down", up.Job, "--json")...)
	if rep.Job != up.Job || rep.Ran != 2 || rep.Live != 0 {
		t.Fatalf("down: %+v", rep)
	}
	if p, err := os.FindProcess(up.PID); err == nil && p.Signal(nil) == nil {
		// Reaped by init or not, a live process answers signal 0.
		t.Errorf("the background up (pid %d) outlived down", up.PID)
	}
	vfJSON(t, bin, &st, vf("status", up.Job, "--json")...)
	if st[0].State != "done" || st[0].Live != 0 || st[0].Up {
		t.Fatalf("status after down: %+v", st)
	}
}
