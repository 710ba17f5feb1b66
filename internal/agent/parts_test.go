package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

func TestFromEnv(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		wire.EnvCoordURL:     "https://coord.example:8443/",
		wire.EnvFleet:        "f1",
		wire.EnvToken:        "tok",
		wire.EnvContainerID:  "38250",
		wire.EnvContainerKey: "ikey",
		"HOME":               "/home/u",
	}
	with := func(kv ...string) func(string) string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}

	cfg, err := FromEnv(with())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CoordURL != "https://coord.example:8443" || cfg.Node != "C.38250" || cfg.InstanceID != 38250 ||
		cfg.StateDir != "/home/u/.vastfleet" || cfg.OrphanAfter != 30*time.Minute || cfg.OrphanPolicy != wire.PolicyStop ||
		cfg.VastURL != wire.DefaultVastURL || cfg.TimeScale != 1 || cfg.Fingerprint != "" || len(cfg.Sessions) != 0 {
		t.Errorf("defaults: %+v", cfg)
	}

	fp := strings.Repeat("AB", 32)
	colons := strings.TrimSuffix(strings.Repeat("AB:", 32), ":")
	cfg, err = FromEnv(with(wire.EnvNode, "n7", wire.EnvStateDir, "/srv/a", wire.EnvFingerprint, colons,
		wire.EnvSessions, `[{"name":"w","command":"run.sh","restart":"always"}]`, wire.EnvOrphanAfter, "45m",
		wire.EnvOrphanPolicy, "destroy", wire.EnvTimeScale, "3000", wire.EnvVastURL, "http://127.0.0.1:9/"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Node != "n7" || cfg.StateDir != "/srv/a" || cfg.Fingerprint != strings.ToLower(fp) || cfg.OrphanAfter != 45*time.Minute ||
		cfg.OrphanPolicy != "destroy" || cfg.TimeScale != 3000 || cfg.VastURL != "http://127.0.0.1:9" ||
		len(cfg.Sessions) != 1 || cfg.Sessions[0].Restart != "always" || cfg.wall(30*time.Minute) != 600*time.Millisecond {
		t.Errorf("set: %+v", cfg)
	}

	// Disarmed, the switch needs neither the id nor the key.
	if _, err := FromEnv(with(wire.EnvOrphanAfter, "0", wire.EnvContainerID, "", wire.EnvContainerKey, "", wire.EnvNode, "n")); err != nil {
		t.Errorf("disarmed: %v", err)
	}

	for _, tc := range []struct {
		kv   []string
		want string // the variable the error names
	}{
		{[]string{wire.EnvCoordURL, ""}, wire.EnvCoordURL},
		{[]string{wire.EnvCoordURL, "coord:8080"}, wire.EnvCoordURL},
		{[]string{wire.EnvFleet, ""}, wire.EnvFleet},
		{[]string{wire.EnvToken, ""}, wire.EnvToken},
		{[]string{wire.EnvFingerprint, "abc"}, wire.EnvFingerprint},
		{[]string{wire.EnvSessions, `{"name":"w"}`}, wire.EnvSessions},
		{[]string{wire.EnvSessions, `[{"name":"../x","command":"c"}]`}, wire.EnvSessions},
		{[]string{wire.EnvSessions, `[{"name":"w","command":"c"},{"name":"w","command":"d"}]`}, wire.EnvSessions},
		{[]string{wire.EnvSessions, `[{"name":"w","command":" "}]`}, wire.EnvSessions},
		{[]string{wire.EnvSessions, `[{"name":"w","command":"c","restart":"sometimes"}]`}, wire.EnvSessions},
		{[]string{wire.EnvOrphanAfter, "30"}, wire.EnvOrphanAfter},
		{[]string{wire.EnvOrphanAfter, "-1m"}, wire.EnvOrphanAfter},
		{[]string{wire.EnvOrphanPolicy, "delete"}, wire.EnvOrphanPolicy},
		{[]string{wire.EnvTimeScale, "0"}, wire.EnvTimeScale},
		{[]string{wire.EnvContainerID, "C.1"}, wire.EnvContainerID},
		{[]string{wire.EnvContainerID, "", wire.EnvNode, "n"}, wire.EnvContainerID},
		{[]string{wire.EnvContainerID, ""}, wire.EnvNode},
		{[]string{wire.EnvContainerKey, ""}, wire.EnvContainerKey},
		{[]string{wire.EnvVastURL, "console.vast.ai"}, wire.EnvVastURL},
	} {
		_, err := FromEnv(with(tc.kv...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s", tc.kv, err, tc.want)
		}
	}
}

// TestSpoolDropsATornLine: a crash in the middle of an append leaves a
// partial last line; the next run keeps every whole finding and appends
// after them cleanly.
func TestSpoolDropsATornLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "spool.jsonl")
	good := `{"key":"a","at":"2026-01-01T00:00:00Z","data":{"x":1}}` + "\n" + `{"key":"b","at":"2026-01-01T00:00:00Z","data":2}` + "\n"
	if err := os.WriteFile(path, []byte(good+`{"key":"c","at":"2026-0`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := openSpool(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.add(wire.Finding{Key: "d", Data: json.RawMessage(`true`)}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ack([]string{"a", "zzz"}); n != 1 || err != nil {
		t.Fatalf("ack: %d %v", n, err)
	}
	if err := s.add(wire.Finding{Key: "e", Data: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	s.close()
	s2, err := openSpool(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.close()
	var keys []string
	for _, f := range s2.batch(100, 1<<20) {
		keys = append(keys, f.Key)
	}
	if strings.Join(keys, ",") != "b,d,e" {
		t.Errorf("spool after a torn line, an ack and appends: %v", keys)
	}
	if b := s2.batch(2, 1<<20); len(b) != 2 {
		t.Errorf("batch of at most 2: %d", len(b))
	}
	if b := s2.batch(100, 1); len(b) != 1 {
		t.Errorf("a batch holds at least one finding however small the byte budget: %d", len(b))
	}
}

func TestLogRotates(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "w.log")
	l, err := openLog(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 39) + "\n"
	for range 10 {
		if _, err := l.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	cur, _ := os.ReadFile(path)
	old, _ := os.ReadFile(path + ".1")
	if len(cur) > 100 || len(old) != 80 || len(cur)%40 != 0 {
		t.Errorf("rotated sizes: current %d, old %d", len(cur), len(old))
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 2 {
		t.Errorf("%d files, want the log and one old one", len(entries))
	}
}

// TestSamplerReadsCgroupV2: inside a container the numbers are the
// container's: CPU from usage_usec over wall time, cores from cpu.max,
// memory as the working set against memory.max.
func TestSamplerReadsCgroupV2(t *testing.T) {
	t.Parallel()
	cg, proc := t.TempDir(), t.TempDir()
	write := func(dir, name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(cg, "cpu.stat", "usage_usec 1000000\nuser_usec 900000\n")
	write(cg, "cpu.max", "400000 100000\n")
	write(cg, "memory.current", "3000000000\n")
	write(cg, "memory.stat", "anon 100\ninactive_file 1000000000\n")
	write(cg, "memory.max", "8000000000\n")
	write(proc, "meminfo", "MemTotal:       64000000 kB\nMemFree: 1 kB\nMemAvailable:   32000000 kB\n")
	write(proc, "uptime", "5000.00 100.0\n")
	write(proc, "1/stat", "1 (tini (x)) S 0 1 1 0 -1 4194560 1 2 0 0 0 0 0 0 20 0 1 0 450000 1 2\n")

	t0 := time.Unix(1_700_000_000, 0)
	s := &sampler{cgroup: cg, proc: proc, diskPath: cg}
	s.cpu(t0)
	write(cg, "cpu.stat", "usage_usec 4500000\n") // 3.5 s of CPU in 1 s: 350%
	var hb wire.Heartbeat
	s.fill(context.Background(), &hb, t0.Add(time.Second))
	if hb.CPUCores != 4 || hb.CPUPercent != 350 || hb.RAMUsedBytes != 2_000_000_000 || hb.RAMTotalBytes != 8_000_000_000 ||
		hb.UptimeS != 500 || hb.DiskTotalBytes <= 0 {
		t.Errorf("cgroup heartbeat: %+v", hb)
	}

	// No memory limit: the machine's memory is the ceiling.
	write(cg, "memory.max", "max\n")
	write(cg, "cpu.max", "max 100000\n")
	if _, total := s.memory(); total != 64_000_000*1024 {
		t.Errorf("unlimited cgroup memory total %d", total)
	}
}

// TestSamplerReadsProc: on a host, CPU is busy over all jiffies times the
// number of CPUs, so a full machine reads 100% per core.
func TestSamplerReadsProc(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	stat := func(user, idle int) {
		text := "cpu  " + strconv.Itoa(user) + " 0 0 " + strconv.Itoa(idle) + " 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0\ncpu1 1 0 0 1 0 0 0 0\nintr 1\n"
		if err := os.WriteFile(filepath.Join(proc, "stat"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stat(100, 100)
	s := &sampler{proc: proc}
	s.cpu(time.Now())
	stat(250, 150) // 150 busy of 200: 75% of the machine, two CPUs
	if got := s.cpu(time.Now()); got != 150 {
		t.Errorf("proc CPU %v%%, want 150", got)
	}
	if err := os.WriteFile(filepath.Join(proc, "meminfo"), []byte("MemTotal: 1000 kB\nMemAvailable: 250 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if used, total := s.memory(); used != 750*1024 || total != 1000*1024 {
		t.Errorf("proc memory %d/%d", used, total)
	}
}

// TestGPUsFromNvidiaSMI runs a stand-in nvidia-smi that answers only the
// exact query the agent is meant to make.
func TestGPUsFromNvidiaSMI(t *testing.T) {
	t.Parallel()
	smi := filepath.Join(t.TempDir(), "nvidia-smi")
	script := `#!/bin/sh
[ "$*" = "--query-gpu=index,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits" ] || { echo "unexpected: $*" >&2; exit 2; }
echo "0, 55, 1000, 143771"
`
	if err := os.WriteFile(smi, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	s := &sampler{proc: t.TempDir(), diskPath: t.TempDir(), nvidiaSMI: smi}
	var hb wire.Heartbeat
	s.fill(context.Background(), &hb, time.Now())
	if len(hb.GPUs) != 1 || hb.GPUs[0] != (wire.GPU{Index: 0, UtilPercent: 55, MemUsedMB: 1000, MemTotalMB: 143771}) {
		t.Errorf("GPUs %+v", hb.GPUs)
	}
}

func TestParseNvidiaSMI(t *testing.T) {
	t.Parallel()
	got := parseNvidiaSMI([]byte("0, 97, 70123, 81559\n1, [N/A], 0, 81559\ngarbage\n"))
	if len(got) != 2 || got[0] != (wire.GPU{Index: 0, UtilPercent: 97, MemUsedMB: 70123, MemTotalMB: 81559}) ||
		got[1] != (wire.GPU{Index: 1, MemTotalMB: 81559}) {
		t.Errorf("%+v", got)
	}
}

// TestTLSPinning: with a fingerprint, the agent talks to exactly the
// certificate it names: the right one works, any other is refused, even
// one the system would trust.
func TestTLSPinning(t *testing.T) {
	t.Parallel()
	c := newFakeCoord(t, true)
	sum := sha256.Sum256(c.srv.Certificate().Raw)
	cfg := c.testConfig(t, t.TempDir())

	cfg.Fingerprint = hex.EncodeToString(sum[:])
	var reply wire.HeartbeatReply
	if err := newCoordClient(cfg).post(context.Background(), wire.PathHeartbeat, wire.Heartbeat{Fleet: "f1", Node: "n"}, &reply); err != nil {
		t.Fatalf("pinned certificate: %v", err)
	}
	if reply.IntervalS != 0.02 {
		t.Errorf("reply %+v", reply)
	}

	other := sha256.Sum256([]byte("another certificate"))
	cfg.Fingerprint = hex.EncodeToString(other[:])
	err := newCoordClient(cfg).post(context.Background(), wire.PathHeartbeat, wire.Heartbeat{Fleet: "f1", Node: "n"}, nil)
	if err == nil || !strings.Contains(err.Error(), "does not match the pinned") {
		t.Errorf("wrong pin: %v", err)
	}
	if _, n := c.lastHeartbeat(); n != 1 {
		t.Errorf("%d heartbeats reached the server, want only the pinned one", n)
	}

	// Without a pin the self-signed certificate is not trusted at all.
	cfg.Fingerprint = ""
	if err := newCoordClient(cfg).post(context.Background(), wire.PathHeartbeat, wire.Heartbeat{}, nil); err == nil {
		t.Error("an unpinned client accepted a self-signed certificate")
	}
}

// agentMayLink are the project's packages the agent may link: the wire
// protocol, how vast's errors read, and the one homes of shell quoting,
// file locks, atomic files, process groups and the TLS pin.
var agentMayLink = map[string]bool{"internal/wire": true, "internal/vasterr": true, "internal/shell": true,
	"internal/filelock": true, "internal/atomicfile": true, "internal/procgroup": true, "internal/certpin": true}

// TestAgentLinksNoStoreOrMarketplace keeps the agent binary small and
// harmless: no SQLite, no database/sql, no store, no marketplace client,
// no simulator.
func TestAgentLinksNoStoreOrMarketplace(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	const mod = "github.com/vastfleet/vastfleet/"
	for _, pkg := range []string{mod + "internal/agent", mod + "cmd/vastfleet-agent"} {
		out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, d := range strings.Fields(string(out)) {
			for _, bad := range []string{"modernc.org/sqlite", "database/sql", mod + "internal/store", mod + "internal/provider", mod + "internal/sim"} {
				if d == bad || strings.HasPrefix(d, bad+"/") {
					t.Errorf("%s links %s", pkg, d)
				}
			}
			// Beyond the standard library, only the wire protocol and the
			// stdlib-only homes of shared rules (this loop sees their
			// dependencies too, so they stay stdlib-only).
			if strings.Contains(strings.SplitN(d, "/", 2)[0], ".") && !agentMayLink[strings.TrimPrefix(d, mod)] && !strings.HasPrefix(d, mod+"internal/agent") && !strings.HasPrefix(d, mod+"cmd/vastfleet-agent") {
				t.Errorf("%s links %s: the agent links the standard library and %v only", pkg, d, slices.Sorted(maps.Keys(agentMayLink)))
			}
		}
	}
}

// The idle rung averages the CPU counter over its window: a counter that
// moves in steps coarser than the sampling (a simulated machine's
// cpu.stat, once a second) reads busy between its steps, and a window is
// judged only once the samples span it.
func TestIdleRungAveragesItsWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run := func(cpuPerStep float64, gpu float64) (firstIdle time.Duration) {
		w := &idleRung{window: 10 * time.Second, below: 5, cores: 4}
		for i := 0; i <= 100; i++ { // a sample every 200 ms for 20 s
			at := time.Duration(i) * 200 * time.Millisecond
			// The counter moves once a second, by cpuPerStep CPU-seconds.
			cpu := float64(i/5) * cpuPerStep
			if w.add(usageSample{at: t0.Add(at), cpuS: cpu, gpu: gpu, hasGPU: gpu >= 0}) {
				return at
			}
		}
		return -1
	}
	if at := run(1, -1); at != -1 { // 1 CPU-s a second of 4 cores: 25%
		t.Errorf("25%% busy in coarse steps read as idle at %v", at)
	}
	if at := run(0.1, -1); at != 10*time.Second { // 2.5%: idle once a whole window is seen
		t.Errorf("2.5%% busy: idle at %v, want at 10s", at)
	}
	if at := run(0, 50); at != -1 {
		t.Errorf("a GPU at 50%% read as idle at %v", at)
	}
	if at := run(0, 1); at != 10*time.Second {
		t.Errorf("CPU and GPU idle: idle at %v, want at 10s", at)
	}
}
