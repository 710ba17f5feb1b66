package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The local market outlives the commands that use it, as vast does: an
// instance rented by one command still answers OpenSSH through the
// exported config after that command has ended; its clock runs at 1x
// between commands (not 60x) and fast only while a command waits on it;
// `sim stop` saves it, and the next command starts it again on the saved
// state.
func TestLocalMarketOutlivesItsCommands(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("OpenSSH client not installed")
	}
	bin := binary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	stopMarketAtCleanup(t, data)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--data-dir", data, "--sim-faults", "none"}, args...)...)
		cmd.Env = append(os.Environ(), "VASTFLEET_SIM_LOCAL=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("vastfleet %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { run("sim", "stop") })
	type inst struct {
		ID     int64   `json:"id"`
		State  string  `json:"state"`
		Uptime float64 `json:"uptime_seconds"`
	}
	ls := func() []inst {
		t.Helper()
		var out []inst
		cmd := []string{"--data-dir", data, "--sim-faults", "none", "ls", "--json"}
		c := exec.Command(bin, cmd...)
		c.Env = append(os.Environ(), "VASTFLEET_SIM_LOCAL=1")
		b, err := c.Output()
		if err != nil {
			t.Fatalf("ls: %v", err)
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("ls: %v\n%s", err, b)
		}
		return out
	}

	// A launch waits minutes of market time in seconds of wall time.
	began := time.Now()
	out := run("launch", "--count", "1", "--deadline", "10m", "--fleet", "keep", "--image", "ubuntu:22.04", "-n", "rentable=True num_gpus=1 dph_total<0.5")
	if !strings.Contains(out, "1 ready of 1") {
		t.Fatalf("launch:\n%s", out)
	}
	if wall := time.Since(began); wall > 90*time.Second {
		t.Fatalf("the launch took %s of wall time", wall)
	}
	first := ls()
	if len(first) != 1 || first[0].State != "running" {
		t.Fatalf("after the launch: %+v", first)
	}

	// The instance answers OpenSSH after the command that rented it ended.
	conf := filepath.Join(dir, "ssh.conf")
	os.WriteFile(conf, []byte(run("export", "--format", "ssh-config", "--fleet", "keep")), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sshOut, err := exec.CommandContext(ctx, "ssh", "-F", conf, "-o", "BatchMode=yes", "keep-node-0", "echo up-between-commands").CombinedOutput()
	if err != nil || !strings.Contains(string(sshOut), "up-between-commands") {
		t.Fatalf("ssh through the exported config after the launch ended: %v\n%s", err, sshOut)
	}

	// 1x between commands: a second of wall time is about a second of
	// market time (60x would be a minute).
	t0 := time.Now()
	time.Sleep(time.Second)
	second := ls()
	wall := time.Since(t0).Seconds()
	if len(second) != 1 {
		t.Fatalf("second ls: %+v", second)
	}
	if moved := second[0].Uptime - first[0].Uptime; moved < 1 || moved > wall+10 {
		t.Fatalf("uptime moved %.1fs over %.1fs of wall time between commands, want about 1x", moved, wall)
	}

	// Stopped and started again, the market keeps its instance (and time
	// ran on meanwhile).
	run("sim", "stop")
	third := ls()
	if len(third) != 1 || third[0].ID != first[0].ID || third[0].Uptime < second[0].Uptime {
		t.Fatalf("after sim stop and a new command: %+v, before %+v", third, second)
	}
	run("destroy", "--all", "--yes")
	if left := ls(); len(left) != 0 {
		t.Fatalf("after destroy: %+v", left)
	}
}
