package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/sim/host"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// helperOut, when set, makes TestProbeHelperProcess the boot probe of a
// simulated machine: the test binary is that machine's agent.
const helperOut = "VASTFLEET_PROBE_HELPER_OUT"

func TestProbeHelperProcess(t *testing.T) {
	out := os.Getenv(helperOut)
	if out == "" {
		t.Skip("runs inside a simulated machine only")
	}
	cfg, err := ProbeFromEnv(os.Getenv)
	if err != nil || cfg == nil {
		t.Fatalf("probe config: %v", err)
	}
	cfg.CPUWindow, cfg.RAMCap, cfg.DiskBytes = 1500*time.Millisecond, 32<<20, 4<<20
	p := RunProbe(context.Background(), *cfg, filepath.Dir(out))
	b, _ := json.Marshal(p)
	if err := os.WriteFile(out+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		t.Fatal(err)
	}
}

// Two simulated machines advertise 8 cores and 2 GPUs each; one truly has
// 3 cores and 1 GPU. Probing both at once, the honest one measures about
// its 8 cores and the spoofed one about its 3: the ratio between the two
// holds however busy this computer is, since both share it at once and
// a run-queue wait is not a stop.
func TestProbeMeasuresSpoofedMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the simulated machines' duty cycle and schedstat are linux's")
	}
	t.Parallel()
	m, err := host.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gpu := host.GPU{Name: "NVIDIA GeForce RTX 4090", MemMiB: 24564, Driver: "550.54.15", UUID: "GPU-1"}
	machines := []struct {
		id int64
		hw host.Hardware
	}{
		{1, host.Hardware{Cores: 8, TrueCores: 8, GPUs: []host.GPU{gpu, gpu}}},
		{2, host.Hardware{Cores: 8, TrueCores: 3, GPUs: []host.GPU{gpu}}},
	}
	for _, mc := range machines {
		out := filepath.Join(m.Dir(mc.id), "probe.json")
		_, err := m.Boot(host.Spec{ID: mc.id, Hardware: mc.hw,
			Env:     []string{helperOut + "=" + out, wire.EnvOfferCores + "=8", wire.EnvOfferGPUs + "=2", wire.EnvOfferRAMMB + "=64000"},
			Onstart: fmt.Sprintf("exec %q -test.run='^TestProbeHelperProcess$' -test.count=1 >probe.log 2>&1", self)})
		if err != nil {
			t.Fatal(err)
		}
	}
	probes := map[int64]wire.Probe{}
	deadline := time.Now().Add(60 * time.Second) // real processes: real time
	for len(probes) < len(machines) && time.Now().Before(deadline) {
		for _, mc := range machines {
			b, err := os.ReadFile(filepath.Join(m.Dir(mc.id), "probe.json"))
			if err == nil {
				var p wire.Probe
				if err := json.Unmarshal(b, &p); err != nil {
					t.Fatal(err)
				}
				probes[mc.id] = p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(probes) < len(machines) {
		for _, mc := range machines {
			b, _ := os.ReadFile(filepath.Join(m.Dir(mc.id), "probe.log"))
			t.Logf("machine %d log:\n%s", mc.id, b)
		}
		t.Fatalf("probes reported: %d of %d", len(probes), len(machines))
	}
	honest, spoofed := probes[1], probes[2]
	t.Logf("honest: %.2f cores (%s, %d workers), %d GPUs; spoofed: %.2f cores, %d GPUs", honest.Cores, honest.CoresMethod,
		honest.Workers, honest.GPUs, spoofed.Cores, spoofed.GPUs)
	for _, p := range []wire.Probe{honest, spoofed} {
		if p.Status != wire.ProbeOK || p.CoresMethod != "availability" || p.RAMBytes != 32<<20 || p.DiskMBps <= 0 {
			t.Fatalf("probe: %+v", p)
		}
	}
	if honest.Cores < 0.75*8 || honest.Cores > 8.01 {
		t.Errorf("honest machine: %.2f cores measured of 8", honest.Cores)
	}
	// True share 3/8 = 0.375; generous bounds either side.
	if r := spoofed.Cores / honest.Cores; r < 0.15 || r > 0.6 {
		t.Errorf("spoofed/honest cores %.2f/%.2f = %.2f, want about 3/8", spoofed.Cores, honest.Cores, r)
	}
	if honest.GPUs != 2 || spoofed.GPUs != 1 || !strings.Contains(honest.GPUNames[0], "4090") || honest.GPUMemMB != 24564 {
		t.Errorf("GPUs: honest %d %v %v, spoofed %d", honest.GPUs, honest.GPUNames, honest.GPUMemMB, spoofed.GPUs)
	}
}

// The stops a probe counts are those its continues ended, however late
// this computer lets it read the notices: the CI run that measured 5.36
// of 3 cores had read them over 100 ms late and counted few stops.
func TestStoppedTimeTakesEachStopOnceHoweverLateItsNotice(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// A 3-of-8 machine's cycle (75 ms run, 125 ms stopped), with the
	// short gaps a busy computer adds between its stops.
	var gaps []gap
	var stops []int // each stop's end, ms
	for c := range 8 {
		base := c * 200
		gaps = append(gaps, gap{at(base + 10), at(base + 18)}, gap{at(base + 75), at(base + 200)}, gap{at(base + 30), at(base + 40)})
		stops = append(stops, base+200)
	}
	slices.SortFunc(gaps, func(a, b gap) int { return a.start.Compare(b.start) })
	const want = 8 * 125 * time.Millisecond
	for _, late := range []int{0, 1, 50, 99, 150, 199, 350} {
		var notices []time.Time
		for _, end := range stops {
			// The simulator signals the group and a process in it: two
			// notices a moment apart.
			notices = append(notices, at(end+late), at(end+late+1))
		}
		if got := stoppedTime(gaps, notices); got != want {
			t.Errorf("notices %d ms late: %v stopped, want %v", late, got, want)
		}
	}
	if got := stoppedTime(gaps, nil); got != 0 {
		t.Errorf("an honest machine, never continued: %v stopped", got)
	}
	// A continue with no stop in the second before it takes nothing.
	if got := stoppedTime(gaps, []time.Time{at(-5), at(5000)}); got != 0 {
		t.Errorf("continues far from any gap: %v stopped", got)
	}
}

// A probe that runs past its bound reports failed, with the stage it was
// in, and never a pass; so does one whose stage fails.
func TestProbeTimeoutIsFailure(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	defer close(hold)
	// On a busy machine the bound may fall in an earlier stage than the
	// disk that never answers; the report must name whichever it was.
	var mu sync.Mutex
	last := ""
	cfg := ProbeConfig{Timeout: 300 * time.Millisecond, CPUWindow: 20 * time.Millisecond, RAMCap: 1 << 20, DiskBytes: 1 << 20,
		before: func(stage string) {
			mu.Lock()
			last = stage
			mu.Unlock()
			if stage == "disk" {
				<-hold // a disk that never answers
			}
		}}
	p := RunProbe(context.Background(), cfg, t.TempDir())
	mu.Lock()
	stage := last
	mu.Unlock()
	// The bound may also fall between the probe naming a stage and the
	// hook seeing it: the next stage is then the one named.
	next := map[string]string{"": "cpu", "cpu": "ram", "ram": "gpu", "gpu": "disk", "disk": "disk"}[stage]
	named := strings.Contains(p.Error, stage) || strings.Contains(p.Error, next)
	if p.Status != wire.ProbeFailed || !strings.Contains(p.Error, "timed out") || !named {
		t.Errorf("a probe held past its bound (last stage begun: %s): %+v", stage, p)
	}

	cfg = ProbeConfig{Timeout: 30 * time.Second, CPUWindow: 20 * time.Millisecond, RAMCap: 1 << 20, DiskBytes: 1 << 20}
	p = RunProbe(context.Background(), cfg, filepath.Join(t.TempDir(), "missing"))
	if p.Status != wire.ProbeFailed || !strings.HasPrefix(p.Error, "disk: ") || p.Cores <= 0 {
		t.Errorf("a probe whose disk stage failed: %+v", p)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p := RunProbe(ctx, cfg, t.TempDir()); p.Status != wire.ProbeFailed {
		t.Errorf("a cancelled probe: %+v", p)
	}
}

func TestProbeFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{wire.EnvOfferCores: "32.5", wire.EnvOfferRAMMB: "128000", wire.EnvOfferGPUs: "4", wire.EnvProbe: "45s", simMachineEnv: "x/1/2"}
	p, err := ProbeFromEnv(func(k string) string { return env[k] })
	if err != nil || p == nil || p.Advertised != (wire.Capacity{Cores: 32.5, RAMMB: 128000, GPUs: 4}) || p.Timeout != 45*time.Second || !p.Simulated {
		t.Fatalf("%+v %v", p, err)
	}
	env[wire.EnvProbe] = "off"
	if p, err := ProbeFromEnv(func(k string) string { return env[k] }); p != nil || err != nil {
		t.Errorf("off: %+v %v", p, err)
	}
	env[wire.EnvProbe], env[wire.EnvOfferGPUs] = "", "many"
	if _, err := ProbeFromEnv(func(k string) string { return env[k] }); err == nil {
		t.Error("a bad GPU count passed")
	}
}

// The agent reports while it probes (stage probe, sessions waiting), then
// sends the probe until a heartbeat carrying it is acknowledged, and only
// then are its sessions started; a restarted agent reports the same probe
// without probing again.
func TestAgentReportsProbeBeforeSessions(t *testing.T) {
	t.Parallel()
	c := newFakeCoord(t, false)
	dir := t.TempDir()
	hold := make(chan struct{})
	cfg := c.testConfig(t, dir, wire.Session{Name: "s", Command: "echo started > '" + filepath.Join(dir, "started") + "'; sleep 60"})
	cfg.Probe = &ProbeConfig{CPUWindow: 20 * time.Millisecond, RAMCap: 1 << 20, DiskBytes: 1 << 20,
		before: func(stage string) {
			if stage == "cpu" {
				<-hold
			}
		}}
	r := start(t, cfg)
	eventually(t, "a heartbeat while probing", func() bool {
		hb, n := c.lastHeartbeat()
		return n > 0 && hb.Stage == wire.StageProbe && hb.Probe == nil
	})
	if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
		t.Fatal("a session started before the probe finished")
	}
	close(hold)
	eventually(t, "the probe reported", func() bool {
		hb, _ := c.lastHeartbeat()
		return hb.Probe != nil && hb.Probe.Status == wire.ProbeOK && hb.Stage == ""
	})
	eventually(t, "the session started", func() bool {
		_, err := os.Stat(filepath.Join(dir, "started"))
		return err == nil
	})
	eventually(t, "later heartbeats without the probe", func() bool {
		hb, _ := c.lastHeartbeat()
		return hb.Probe == nil && hb.Stage == ""
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	// A restart: the kept probe, not a new one (the hook would hold it).
	cfg.Probe.before = func(string) { t.Error("probed again after a restart") }
	c.set(func(c *fakeCoord) { c.heartbeats = nil })
	start(t, cfg)
	eventually(t, "the kept probe reported", func() bool {
		hb, _ := c.lastHeartbeat()
		return hb.Probe != nil && hb.Probe.Status == wire.ProbeOK
	})
}

// Without the offer's figures in its environment (a bulk create gives all
// offers one body), the probe is sized from what the coordinator says the
// marketplace lists for the machine, at enrollment.
func TestProbeSizedFromTheListingAtEnrollment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, token := fleetWithItems(t, nil)
	listed := wire.Capacity{Cores: 3, RAMMB: 5, GPUs: 0, DownMbps: 800}
	members := coord.MembershipFunc(func(context.Context, string) (map[int64]coord.Instance, error) {
		return map[int64]coord.Instance{7: {MachineID: 1007, Advertised: listed}}, nil
	})
	srv, err := coord.New(coord.Config{DB: db, HeartbeatInterval: 50 * time.Millisecond, Members: members})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	dir := t.TempDir()
	r := start(t, Config{
		CoordURL: hs.URL, Fleet: "f1", Node: "n7", Token: token, InstanceID: 7,
		Probe:    &ProbeConfig{CPUWindow: 20 * time.Millisecond, RAMCap: 1 << 20, DiskBytes: 1 << 20, DownloadBytes: 3 << 20},
		StateDir: dir, StopGrace: time.Second, FirstJitter: -1,
		FirstInterval: 50 * time.Millisecond, restartBase: 10 * time.Millisecond, retryBase: 10 * time.Millisecond,
	})
	defer r.stop(t)
	var probe *wire.Probe
	eventually(t, "the probe, sized from the listing", func() bool {
		for _, n := range srv.Snapshot(ctx, "f1").Nodes {
			if n.Node == "n7" && n.Probe != nil {
				if n.Probe.Advertised != listed {
					t.Fatalf("probe sized from %+v, want the listed %+v", n.Probe.Advertised, listed)
				}
				probe = n.Probe
				return true
			}
		}
		return false
	})
	// The download from the coordinator, on loopback: all of it, timed.
	if probe.DownloadBytes != 3<<20 || probe.DownloadMBps <= 0 || probe.DownloadError != "" || probe.Status != wire.ProbeOK {
		t.Errorf("probe download: %+v", probe)
	}
	b, err := os.ReadFile(filepath.Join(dir, credentialFile))
	if err != nil || !strings.Contains(string(b), `"advertised":{"cores":3,"ram_mb":5,"gpus":0,"down_mbps":800}`) {
		t.Errorf("saved credential %s (%v) does not keep the listed figures for a restart", b, err)
	}
	// The instance's credential gets a few probe downloads, no more: a
	// host cannot spend the coordinator's bandwidth at will.
	var sc savedCredential
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatal(err)
	}
	c := &coordClient{base: hs.URL, token: sc.Token, http: hs.Client()}
	for i := 2; i <= probeBlobsAllowed+1; i++ {
		rc, err := c.download(ctx, 1<<10)
		if i <= probeBlobsAllowed {
			if err != nil {
				t.Fatalf("download %d: %v", i, err)
			}
			rc.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "429") {
			t.Errorf("download %d: %v, want 429", i, err)
		}
	}
}

// probeBlobsAllowed is the coordinator's probeBlobsPerCredential.
const probeBlobsAllowed = 4

// TestProbeDownloadSaysWhyItIsNotMeasured: without a coordinator, with
// one that sends nothing, and with one that stalls halfway, the download
// is reported as not measured or cut short, with what came; the probe
// itself passes or fails on its other stages.
func TestProbeDownloadSaysWhyItIsNotMeasured(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := ProbeConfig{CPUWindow: 20 * time.Millisecond, RAMCap: 1 << 20, DiskBytes: 1 << 20, DownloadBytes: 1 << 20, DownloadWindow: 200 * time.Millisecond}
	if p := RunProbe(ctx, base, t.TempDir()); p.Status != wire.ProbeOK || p.DownloadMBps != 0 || !strings.HasPrefix(p.DownloadError, "not measured: no coordinator") {
		t.Errorf("no coordinator: %+v", p)
	}
	release := make(chan struct{})
	defer close(release)
	stall := func(send int) *httptest.Server {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(1<<20))
			w.Write(make([]byte, send))
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(hs.Close)
		return hs
	}
	for _, tc := range []struct {
		name string
		send int
		want string
	}{
		{"nothing sent", 0, "not measured: nothing arrived within 200ms"},
		{"stalled halfway", 512 << 10, "cut short at the 200ms window: 524288 of 1048576 bytes"},
	} {
		hs := stall(tc.send)
		c := &coordClient{base: hs.URL, token: "t", http: hs.Client()}
		cfg := base
		cfg.Download = c.download
		p := RunProbe(ctx, cfg, t.TempDir())
		if p.Status != wire.ProbeOK || p.DownloadBytes != int64(tc.send) || !strings.HasPrefix(p.DownloadError, tc.want) ||
			(tc.send > 0) != (p.DownloadMBps > 0) {
			t.Errorf("%s: %+v, want %q", tc.name, p, tc.want)
		}
	}
}

// TestGPUAllocIsDemandedOrNotMeasured: the GPUs nvidia-smi lists are
// demanded through an interpreter with torch; what took the allocation is
// ok, fewer is short, and without torch and CUDA (this computer has no
// GPU) it is not measured and says why, never a pass. The fake
// interpreters stand for torch's answers; python3, where installed, runs
// the real script (here: no torch or no CUDA).
func TestGPUAllocIsDemandedOrNotMeasured(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	fake := func(name, script string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, python string
		status       string
		gpus         int
		why          string
	}{
		{"no interpreter", filepath.Join(dir, "missing"), wire.GPUAllocNotMeasured, 0, "no python3"},
		{"all allocated", fake("all", "echo allocated 2 2"), wire.GPUAllocOK, 2, ""},
		{"one short", fake("short", "echo 'device 1: CUDA out of memory'; echo allocated 1 2"), wire.GPUAllocShort, 1, "1 of the 2 GPUs nvidia-smi lists took 19651 MiB each (CUDA sees 2): device 1: CUDA out of memory"},
		{"no torch", fake("notorch", "echo \"unavailable: no torch (No module named 'torch')\"; exit 3"), wire.GPUAllocNotMeasured, 0, "no torch"},
		{"crashed", fake("crash", "echo Segmentation fault; exit 139"), wire.GPUAllocNotMeasured, 0, "the allocation failed (exit status 139): Segmentation fault"},
	} {
		status, gpus, mb, why := probeGPUAlloc(ctx, tc.python, 2, 24564)
		if status != tc.status || gpus != tc.gpus || !strings.HasPrefix(why, tc.why) || (status != wire.GPUAllocNotMeasured) != (mb == 19651) {
			t.Errorf("%s: %q %d GPUs %.0f MiB %q; want %q %d %q", tc.name, status, gpus, mb, why, tc.status, tc.gpus, tc.why)
		}
	}
	if _, err := exec.LookPath("python3"); err == nil {
		status, _, _, why := probeGPUAlloc(ctx, "", 1, 1000)
		if status != wire.GPUAllocNotMeasured || !strings.Contains(why, "torch") {
			t.Errorf("python3 on a computer without a GPU: %q %q", status, why)
		}
	}
}
