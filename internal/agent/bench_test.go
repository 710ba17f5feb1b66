package agent

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

var idleWindow = flag.Duration("agent.idle", 20*time.Second, "how long BenchmarkAgentIdle measures the idle agent")

// BenchmarkAgentIdle builds the agent binary as it ships (-ldflags='-s -w'),
// runs it against a coordinator on loopback with one `sleep` session and
// the default 10 s heartbeat, and measures the agent process alone (not
// its session) over -agent.idle:
//
//	go test -run '^$' -bench BenchmarkAgentIdle -benchtime 1x ./internal/agent
//
// Targets (issue 13): rss_MB < 15, cpu_%_core < 0.5, binary_MB < 10.
func BenchmarkAgentIdle(b *testing.B) {
	dir := b.TempDir()
	bin := buildAgent(b, dir)
	st, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}

	c := newFakeCoord(b, false)
	c.reply = wire.HeartbeatReply{IntervalS: 10}
	cmd := exec.Command(bin, "agent")
	cmd.Env = append(os.Environ(),
		wire.EnvCoordURL+"="+c.srv.URL, wire.EnvFleet+"=bench", wire.EnvNode+"=n1", wire.EnvToken+"="+testToken,
		wire.EnvOrphanAfter+"=0", wire.EnvStateDir+"="+filepath.Join(dir, "state"),
		wire.EnvSessions+`=[{"name":"idle","command":"exec sleep 3600"}]`)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	pid := cmd.Process.Pid
	// Past start-up and the first heartbeats.
	deadline := time.Now().Add(30 * time.Second)
	for _, n := c.lastHeartbeat(); n < 1; _, n = c.lastHeartbeat() {
		if time.Now().After(deadline) {
			b.Fatal("no heartbeat from the agent")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)

	b.ResetTimer()
	cpu0, t0 := cpuTicks(b, pid), time.Now()
	time.Sleep(*idleWindow)
	cpu1, t1 := cpuTicks(b, pid), time.Now()
	b.StopTimer()
	rss, hwm := rssKB(b, pid)
	_, beats := c.lastHeartbeat()

	b.ReportMetric(float64(rss)/1024, "rss_MB")
	b.ReportMetric(float64(hwm)/1024, "peak_rss_MB")
	b.ReportMetric((cpu1-cpu0)/100/t1.Sub(t0).Seconds()*100, "cpu_%_core")
	b.ReportMetric(float64(st.Size())/(1<<20), "binary_MB")
	b.ReportMetric(float64(beats), "heartbeats")
}

// buildAgent builds cmd/vastfleet-agent as it ships into dir.
func buildAgent(tb testing.TB, dir string) string {
	tb.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		tb.Skip("go not on PATH")
	}
	bin := filepath.Join(dir, "vastfleet-agent")
	build := exec.Command(gobin, "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "github.com/vastfleet/vastfleet/cmd/vastfleet-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("building the agent: %v\n%s", err, out)
	}
	return bin
}

// cpuTicks is a process's user+system time in clock ticks (100/s).
func cpuTicks(b *testing.B, pid int) float64 {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(s[strings.LastIndexByte(string(s), ')')+1:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return utime + stime
}

// rssKB is a process's resident memory now and at its peak.
func rssKB(b *testing.B, pid int) (rss, hwm int64) {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(s), "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	return rss, hwm
}
