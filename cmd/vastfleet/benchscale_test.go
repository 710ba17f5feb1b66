package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"runtime"
	"testing"

	"github.com/vastfleet/vastfleet/internal/scalebench"
)

// TestBenchScale runs `bench scale` as the README's 1,000-node run, reduced
// (three nodes, a short job, a small tree), so a change that breaks the
// benchmark fails here: every phase reaches every node, and the summary's
// figures are measured.
func TestBenchScale(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds binaries and runs a market, a coordinator and agents")
	}
	for _, tool := range []string{"curl", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the agent's onstart needs %s", tool)
		}
	}
	const nodes = 3
	cmd := exec.Command(binary(t), "bench", "scale", "--nodes", "3", "--heartbeat", "1s", "--work", "2000",
		"--sync-mb", "0.2", "--sync-files", "4", "--phase-timeout", "3m", "--mem-floor-mb", "0", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench scale: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	var phases []string
	for _, l := range lines[:len(lines)-1] {
		var p scalebench.Phase
		if err := json.Unmarshal(l, &p); err != nil || p.Event != "phase" {
			t.Fatalf("not a phase line (%v): %s", err, l)
		}
		phases = append(phases, p.Phase)
		if p.Skipped || p.Error != "" || p.OK != nodes {
			t.Errorf("phase %s: %d of %d nodes, skipped %v, error %q", p.Phase, p.OK, p.Nodes, p.Skipped, p.Error)
		}
		if len(p.Usage) == 0 || p.Usage[len(p.Usage)-1].Process != scalebench.ProcHosts {
			t.Errorf("phase %s: usage %+v", p.Phase, p.Usage)
		}
	}
	want := []string{"launch", "job", "exec", "sync", "collect", "destroy", "report"}
	if len(phases) != len(want) {
		t.Fatalf("phases %v, want %v", phases, want)
	}
	for i := range want {
		if phases[i] != want[i] {
			t.Fatalf("phases %v, want %v", phases, want)
		}
	}
	var s scalebench.Summary
	if err := json.Unmarshal(lines[len(lines)-1], &s); err != nil || s.Event != "summary" {
		t.Fatalf("the last line is not the summary (%v): %s", err, lines[len(lines)-1])
	}
	t.Logf("summary: %s", lines[len(lines)-1])
	if s.Nodes != nodes || s.Ready != nodes || s.JobOK != nodes || s.ExecOK != nodes || s.SyncOK != nodes || s.CollectOK != nodes ||
		s.Destroyed != nodes || s.Findings != nodes || s.Failed != "" {
		t.Errorf("nodes reached: %+v", s)
	}
	if s.PeakRSSMB <= 0 || s.CPUS <= 0 || s.WallS <= 0 {
		t.Errorf("vastfleet's figures: peak RSS %.1f MB, CPU %.2f s, wall %.1f s", s.PeakRSSMB, s.CPUS, s.WallS)
	}
	if runtime.GOOS == "linux" {
		if s.SimPeakRSSMB <= 0 || s.CoordPeakRSSMB <= 0 || s.SimPeakFDs <= 0 || s.PeakFDs <= 0 || s.HostsPeakRSSMB <= 0 || s.HostsPeakProcs < nodes {
			t.Errorf("figures from /proc: %+v", s)
		}
		if s.HostsLeft != 0 {
			t.Errorf("%d of the machines' processes outlived the destroy", s.HostsLeft)
		}
	}
}
