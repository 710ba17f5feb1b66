package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/procgroup"

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
	_, sshErr := exec.LookPath("ssh")
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
		if p.Phase == "ssh" && sshErr != nil {
			continue // skipped: no OpenSSH client here
		}
		if p.Phase == "ssh" && (len(p.Usage) == 0 || p.Usage[0].Process != scalebench.ProcSSH || p.Usage[0].CPUS == nil || *p.Usage[0].CPUS <= 0) {
			t.Errorf("ssh phase: the clients' CPU not measured: %+v", p.Usage)
		}
		if p.Skipped || p.Error != "" || p.OK != nodes {
			t.Errorf("phase %s: %d of %d nodes, skipped %v, error %q", p.Phase, p.OK, p.Nodes, p.Skipped, p.Error)
		}
		if len(p.Usage) == 0 || p.Usage[len(p.Usage)-1].Process != scalebench.ProcHosts {
			t.Errorf("phase %s: usage %+v", p.Phase, p.Usage)
		}
	}
	want := []string{"launch", "job", "exec", "ssh", "sync", "collect", "destroy", "report"}
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
		s.Destroyed != nodes || s.Findings != nodes || (sshErr == nil && (s.SSHOK != nodes || s.ExecSpeedup <= 0 || s.SSHCPUS <= 0)) || s.ExecCPUS <= 0 || s.Failed != "" {
		t.Errorf("nodes reached: %+v", s)
	}
	// The machines' links are paced (--links is the default): sync says
	// when the last node held the tree and what its link allowed.
	if s.SyncLastS <= 0 || s.SyncLinkS <= 0 || s.SyncLastS < s.SyncLinkS {
		t.Errorf("sync's last node %.3fs against its link's %.3fs", s.SyncLastS, s.SyncLinkS)
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

// TestBenchScaleLeavesNothingRunning stops `bench scale` mid-launch, with a
// terminal's Ctrl+C (SIGINT to its process group) and with kill -9, and
// finds none of its simulated machines'
// processes left: an interrupted 1,000-node run once left 931 agents
// running after its market had gone.
func TestBenchScaleLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds binaries and runs a market, a coordinator and agents")
	}
	if runtime.GOOS != "linux" {
		t.Skip("finds the machines' processes in /proc")
	}
	for _, tool := range []string{"curl", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the agent's onstart needs %s", tool)
		}
	}
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			marker := "VASTFLEET_SIM_MACHINE=" + filepath.Join(dir, "tmp") + "/"
			cmd := exec.Command(binary(t), "bench", "scale", "--nodes", "4", "--heartbeat", "1s", "--work", "2000",
				"--sync-mb", "0.2", "--sync-files", "4", "--phase-timeout", "3m", "--mem-floor-mb", "0", "--keep", dir, "--json")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			// Its own group, as a terminal's foreground job: Ctrl+C goes to
			// the whole group.
			procgroup.Own(cmd)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				procgroup.KillMarked(marker)
				procgroup.KillMarked("TMPDIR=" + filepath.Join(dir, "tmp"))
			})
			// Two machines' agents are running: the launch is under way.
			agents := func() int {
				n := 0
				for _, pid := range procgroup.MarkedPIDs(marker) {
					if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.Contains(b, []byte("vastfleet-agent")) {
						n++
					}
				}
				return n
			}
			deadline := time.Now().Add(3 * time.Minute)
			for agents() < 2 {
				select {
				case err := <-done:
					t.Fatalf("bench scale ended before its machines ran (%v):\n%s", err, stderr.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("no machine ran within 3 minutes:\n%s", stderr.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := procgroup.Kill(cmd.Process.Pid, sig.(syscall.Signal)); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(3 * time.Minute):
				cmd.Process.Kill()
				t.Fatalf("bench scale did not end within 3 minutes of %v:\n%s", sig, stderr.String())
			}
			if sig == syscall.SIGINT && !bytes.Contains(stdout.Bytes(), []byte(`"phase":"destroy"`)) {
				t.Errorf("interrupted, the bench did not destroy the fleet:\n%s\n%s", stdout.String(), stderr.String())
			}
			// Killed outright, the bench cannot clean up: its market, told
			// by the kernel, stops its machines itself. (The launch under
			// way is told too, and gives up its destroys, the market gone,
			// within its own cleanup bound of a minute or so: not waited
			// for here.)
			deadline = time.Now().Add(time.Minute)
			for {
				var live []string
				// The machines' processes, and the market and coordinator
				// (every process the bench starts has its TMPDIR).
				for _, pid := range append(procgroup.MarkedPIDs(marker), procgroup.MarkedPIDs("TMPDIR="+filepath.Join(dir, "tmp"))...) {
					if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !bytes.Contains(b, []byte(") Z ")) {
						cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
						if bytes.Contains(cmdline, []byte("\x00launch\x00")) {
							continue
						}
						live = append(live, fmt.Sprintf("%d %.300s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
					}
				}
				if len(live) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of the bench's processes outlived it after %v: %v\n%s", len(live), sig, live, stderr.String())
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
