package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// TestSessionsReportMetricsAndFindings: what sessions print arrives at the
// coordinator: metrics in the heartbeat (latest value), findings once
// each, plain lines in the session's log, and the session states.
func TestSessionsReportMetricsAndFindings(t *testing.T) {
	t.Parallel()
	c := newFakeCoord(t, false)
	dir := t.TempDir()
	cfg := c.testConfig(t, dir,
		wire.Session{Name: "worker", Command: `echo '{"metric":"keys_per_s","value":1}'
echo '{"metric":"keys_per_s","value":42.5}'
echo '{"found":{"key":"abc","n":1}}'
echo 'plain output'
echo '{"found":{"key":"def","n":2}}'
echo 'to stderr' >&2
exec sleep 1000`},
		wire.Session{Name: "once", Command: "exit 0", Restart: "never"},
		wire.Session{Name: "flaky", Command: "exit 3"}, // on-failure: restarted
	)
	r := start(t, cfg)

	eventually(t, "two findings stored", func() bool { return len(c.storedKeys()) == 2 })
	eventually(t, "a heartbeat with the metric, the worker running and the flaky one restarted", func() bool {
		hb, _ := c.lastHeartbeat()
		st := map[string]wire.SessionState{}
		for _, s := range hb.Sessions {
			st[s.Name] = s
		}
		return hb.Metrics["keys_per_s"] == 42.5 && st["worker"].State == stateRunning && st["worker"].PID > 0 &&
			st["once"].State == stateExited && st["flaky"].Restarts >= 2
	})
	hb, _ := c.lastHeartbeat()
	if hb.Fleet != "f1" || hb.Node != "C.1" || hb.CPUCores <= 0 || hb.RAMTotalBytes <= 0 || hb.DiskTotalBytes <= 0 || hb.UptimeS <= 0 {
		t.Errorf("heartbeat machine fields: %+v", hb)
	}
	for _, s := range hb.Sessions {
		if s.Name == "once" && (s.ExitCode == nil || *s.ExitCode != 0) {
			t.Errorf("session once: %+v", s)
		}
		if s.Name == "flaky" && s.ExitCode != nil && *s.ExitCode != 3 {
			t.Errorf("session flaky: exit %d", *s.ExitCode)
		}
	}

	var data []string
	c.mu.Lock()
	for k, f := range c.stored {
		if !strings.HasPrefix(k, "C.1/worker/") || f.Session != "worker" || f.At.IsZero() {
			t.Errorf("finding %s: %+v", k, f)
		}
		data = append(data, string(f.Data))
	}
	c.mu.Unlock()
	if got := strings.Join(sortedStrings(data), " "); got != `{"key":"abc","n":1} {"key":"def","n":2}` {
		t.Errorf("finding data: %s", got)
	}
	eventually(t, "the spool emptied by the acks", func() bool { return len(spoolKeys(t, dir)) == 0 })

	logText, err := os.ReadFile(filepath.Join(dir, "logs", "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"plain output", "to stderr", `{"found":{"key":"abc","n":1}}`} {
		if !strings.Contains(string(logText), want) {
			t.Errorf("worker.log lacks %q:\n%s", want, logText)
		}
	}
	if err := r.stop(t); err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
	// The sessions never saw the agent token.
	if strings.Contains(string(logText), testToken) {
		t.Error("token in session output")
	}
}

// TestCoordinatorErrorsLoseNothing: a coordinator that fails (500) and
// one that commits but loses its answer: every finding ends up stored,
// each exactly once, and the spool empties.
func TestCoordinatorErrorsLoseNothing(t *testing.T) {
	t.Parallel()
	c := newFakeCoord(t, false)
	c.set(func(c *fakeCoord) { c.failFinds, c.storeNoAck = 4, 2 })
	dir := t.TempDir()
	const n = 200
	cfg := c.testConfig(t, dir, wire.Session{Name: "w", Restart: "never",
		Command: fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "{\"found\":{\"i\":$i}}"; i=$((i+1)); done`, n)})
	r := start(t, cfg)

	eventually(t, "every finding stored", func() bool { return len(c.storedKeys()) == n })
	eventually(t, "the spool emptied", func() bool { return len(spoolKeys(t, dir)) == 0 })
	r.stop(t)

	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	resent := 0
	for k, f := range c.stored {
		var d struct{ I int }
		if err := json.Unmarshal(f.Data, &d); err != nil {
			t.Fatal(err)
		}
		seen[strconv.Itoa(d.I)] = true
		if c.received[k] > 1 {
			resent++
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct findings stored, want %d", len(seen), n)
	}
	// The answers lost after a commit made the agent send those again.
	if resent == 0 {
		t.Error("no finding was resent after a lost acknowledgement")
	}
}

// TestSpoolResentAfterRestart: findings spooled while the coordinator is
// down survive the agent's end; a new agent on the same state directory
// sends them, and the coordinator ends with the complete set once each.
func TestSpoolResentAfterRestart(t *testing.T) {
	t.Parallel()
	c := newFakeCoord(t, false)
	dir := t.TempDir()
	const n = 30
	// The first request commits but its answer is lost, the rest fail.
	c.set(func(c *fakeCoord) { c.storeNoAck, c.failFinds = 1, 0 })
	cfg := c.testConfig(t, dir, wire.Session{Name: "w", Restart: "never",
		Command: fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "{\"found\":{\"i\":$i}}"; i=$((i+1)); done`, n)})
	r := start(t, cfg)
	eventually(t, "every finding spooled and one batch committed unacknowledged", func() bool {
		c.mu.Lock()
		committed := len(c.stored) > 0 && c.storeNoAck == 0
		if committed {
			c.down = true
		}
		c.mu.Unlock()
		return committed && len(spoolKeys(t, dir)) == n
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	first := spoolKeys(t, dir)
	if len(first) != n {
		t.Fatalf("spool after the first run holds %d findings, want %d", len(first), n)
	}
	before := len(c.storedKeys())

	c.set(func(c *fakeCoord) { c.down = false })
	cfg.Sessions = nil
	r2 := start(t, cfg)
	eventually(t, "the spool resent and emptied", func() bool { return len(spoolKeys(t, dir)) == 0 })
	r2.stop(t)

	got := c.storedKeys()
	for _, k := range first {
		if !got[k] {
			t.Errorf("finding %s was never stored", k)
		}
	}
	if len(got) != n {
		t.Errorf("coordinator stored %d findings, want %d", len(got), n)
	}
	c.mu.Lock()
	dups := 0
	for _, k := range first {
		if c.received[k] > 1 {
			dups++
		}
	}
	c.mu.Unlock()
	// What the first run had committed was sent again (its ack was lost)
	// and de-duplicated by key.
	if before > 0 && dups < before {
		t.Errorf("%d findings committed before the restart, only %d arrived twice", before, dups)
	}
}

// TestStopEndsTheWholeGroup: a session that ignores SIGINT is killed after
// the grace, together with the children it started.
func TestStopEndsTheWholeGroup(t *testing.T) {
	t.Parallel()
	c := newFakeCoord(t, false)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	cfg := c.testConfig(t, dir, wire.Session{Name: "stubborn",
		Command: `trap '' INT; sleep 1000 & echo $! > ` + pidFile + `; echo '{"metric":"up","value":1}'; wait`})
	cfg.StopGrace = 100 * 1e6 // 100 ms
	r := start(t, cfg)
	eventually(t, "the session running", func() bool {
		hb, _ := c.lastHeartbeat()
		return hb.Metrics["up"] == 1
	})
	hb, _ := c.lastHeartbeat()
	shell := hb.Sessions[0].PID
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{shell, child} {
		eventually(t, fmt.Sprintf("process %d gone", pid), func() bool {
			return syscall.Kill(pid, 0) == syscall.ESRCH || zombie(pid)
		})
	}
	log, _ := os.ReadFile(filepath.Join(dir, "logs", "stubborn.log"))
	if !strings.Contains(string(log), "ignored SIGINT") {
		t.Errorf("log does not say why it was killed:\n%s", log)
	}
}

// zombie reports whether pid has exited and waits for its parent (init,
// here) to reap it.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && strings.HasPrefix(string(b[i:]), ") Z")
}

// TestSecondAgentOnOneDirRefused: two agents would run every session twice.
func TestSecondAgentOnOneDirRefused(t *testing.T) {
	t.Parallel()
	c := newFakeCoord(t, false)
	dir := t.TempDir()
	start(t, c.testConfig(t, dir))
	eventually(t, "a heartbeat", func() bool { _, n := c.lastHeartbeat(); return n > 0 })
	r2 := start(t, c.testConfig(t, dir))
	if err := r2.wait(t); err == nil || !strings.Contains(err.Error(), "another agent") {
		t.Errorf("second agent: %v", err)
	}
}

func sortedStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}
