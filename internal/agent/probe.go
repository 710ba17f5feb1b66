package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/procgroup"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// ProbeConfig bounds the boot probe: what a machine truly delivers,
// measured by demanding it, before any session starts. A lie is exposed
// by what is demanded, not by what is enumerated: the probe runs as many
// spinning threads as cores advertised, allocates and touches the RAM, and
// asks nvidia-smi for the GPUs (on a real host a spoofed NVML can still
// lie there; the cores and RAM it cannot fake).
type ProbeConfig struct {
	// Timeout bounds the whole probe; past it the probe reports failed,
	// never a pass. 0: DefaultProbeTimeout.
	Timeout time.Duration
	// CPUWindow is how long the threads spin; 0: 2 s.
	CPUWindow time.Duration
	// RAMCap bounds the RAM allocated (the advertised RAM, or this when
	// less); 0: 512 MiB.
	RAMCap int64
	// DiskBytes are written (and synced) to measure the disk; 0: 64 MiB.
	DiskBytes int64
	// Advertised is what the offer claims (zero fields: unknown, the
	// probe then sizes itself from what the machine shows).
	Advertised wire.Capacity
	// Download, when set, opens a download of n bytes from the
	// coordinator (wire.PathProbeBlob); nil: download not measured.
	Download func(ctx context.Context, n int64) (io.ReadCloser, error)
	// DownloadBytes are asked for; 0: 32 MiB (4 MiB simulated).
	DownloadBytes int64
	// DownloadWindow bounds the download: what came by then is timed;
	// 0: 10 s.
	DownloadWindow time.Duration
	// Python is the interpreter the GPU allocation runs with (it needs
	// torch with CUDA; the agent links no CUDA): "" is python3 on PATH.
	Python string
	// Simulated: the machine is a simulator's, whose CPUs every simulated
	// machine shares. Time a thread waits in the run queue is then
	// another machine's use of this computer, not a loss of its own, so
	// cores are measured as availability: the share of wall time the
	// threads may run (on a CPU or queued), times the cores advertised.
	// A simulated machine short of cores is stopped part of the time
	// (sim/host), which this sees; what a real machine loses to other
	// tenants or a CPU quota shows in CPU time instead.
	Simulated bool

	// before runs before each stage (tests hold the probe up with it).
	before func(stage string)
}

// Probe bounds.
const (
	DefaultProbeTimeout = 60 * time.Second
	defaultCPUWindow    = 2 * time.Second
	defaultRAMCap       = 512 << 20
	defaultDiskBytes    = 64 << 20
	maxProbeWorkers     = 256
	ramChunk            = 16 << 20
	defaultDownload     = 32 << 20
	simDownload         = 4 << 20
	defaultDownloadWin  = 10 * time.Second
	simRAMCap           = 32 << 20
	simDiskBytes        = 4 << 20
)

func (p ProbeConfig) withDefaults() ProbeConfig {
	if p.Simulated {
		// A simulated machine's RAM and disk are this computer's, shared
		// with every other one: a token check, not a demand.
		if p.RAMCap <= 0 {
			p.RAMCap = simRAMCap
		}
		if p.DiskBytes <= 0 {
			p.DiskBytes = simDiskBytes
		}
		if p.DownloadBytes <= 0 {
			p.DownloadBytes = simDownload
		}
	}
	if p.DownloadBytes <= 0 {
		p.DownloadBytes = defaultDownload
	}
	p.DownloadBytes = min(p.DownloadBytes, wire.MaxProbeBlob)
	if p.DownloadWindow <= 0 {
		p.DownloadWindow = defaultDownloadWin
	}
	if p.Timeout <= 0 {
		p.Timeout = DefaultProbeTimeout
	}
	if p.CPUWindow <= 0 {
		p.CPUWindow = defaultCPUWindow
	}
	if p.RAMCap <= 0 {
		p.RAMCap = defaultRAMCap
	}
	if p.DiskBytes <= 0 {
		p.DiskBytes = defaultDiskBytes
	}
	return p
}

// RunProbe measures the machine within cfg.Timeout. dir takes the disk
// test's file. Whatever fails or runs out of time makes the result
// failed, with the figures measured so far.
func RunProbe(ctx context.Context, cfg ProbeConfig, dir string) wire.Probe {
	cfg = cfg.withDefaults()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	res := wire.Probe{Status: wire.ProbeOK, Advertised: cfg.Advertised}
	// The stages run in their own goroutine so that one stuck in a
	// system call (a hung disk) still ends the probe at its bound.
	var mu sync.Mutex
	stage := ""
	done := make(chan struct{})
	var out wire.Probe
	var stageErr error
	base := res // the goroutine's own copy: res is written below on a timeout
	go func() {
		defer close(done)
		r := base
		step := func(name string, f func() error) bool {
			mu.Lock()
			stage = name
			mu.Unlock()
			if cfg.before != nil {
				cfg.before(name)
			}
			if err := ctx.Err(); err != nil {
				stageErr = err
				return false
			}
			if err := f(); err != nil {
				stageErr = fmt.Errorf("%s: %w", name, err)
				return false
			}
			return true
		}
		_ = step("cpu", func() (err error) {
			r.Cores, r.CoresMethod, r.Workers, err = probeCores(ctx, cfg)
			return err
		}) && step("ram", func() (err error) {
			r.RAMBytes, r.RAMTargetBytes, err = probeRAM(ctx, cfg)
			return err
		}) && step("gpu", func() error {
			probeGPUStage(ctx, cfg, &r)
			return nil
		}) && step("disk", func() (err error) {
			r.DiskMBps, err = probeDisk(ctx, dir, cfg.DiskBytes)
			return err
		}) && step("download", func() error {
			r.DownloadMBps, r.DownloadBytes, r.DownloadError = probeDownload(ctx, cfg)
			return nil
		})
		out = r
	}()
	select {
	case <-done:
		res = out
		if stageErr != nil {
			res.Status, res.Error = wire.ProbeFailed, stageErr.Error()
			if errors.Is(stageErr, context.DeadlineExceeded) {
				res.Error = fmt.Sprintf("timed out after %v (%v)", cfg.Timeout, stageErr)
			}
		}
	case <-ctx.Done():
		mu.Lock()
		at := stage
		mu.Unlock()
		res.Status = wire.ProbeFailed
		res.Error = fmt.Sprintf("timed out after %v during %s", cfg.Timeout, at)
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			res.Error = "cancelled during " + at
		}
	}
	res.DurationS = time.Since(start).Seconds()
	return res
}

// probeDownload times a download of cfg.DownloadBytes from the
// coordinator within cfg.DownloadWindow: MB/s over what arrived, and why
// it was not measured or was cut short. Like nvidia-smi's absence, a
// failed download is reported beside the probe, not as its failure: the
// coordinator's own link bounds it as much as the machine's.
func probeDownload(ctx context.Context, cfg ProbeConfig) (mbps float64, got int64, why string) {
	if cfg.Download == nil {
		return 0, 0, "not measured: no coordinator to download from"
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.DownloadWindow)
	defer cancel()
	start := time.Now()
	rc, err := cfg.Download(wctx, cfg.DownloadBytes)
	if err != nil {
		return 0, 0, "not measured: " + err.Error()
	}
	defer rc.Close()
	got, err = io.Copy(io.Discard, io.LimitReader(rc, cfg.DownloadBytes))
	took := time.Since(start)
	switch {
	case got == 0:
		return 0, 0, fmt.Sprintf("not measured: nothing arrived within %v (%v)", cfg.DownloadWindow, err)
	case got < cfg.DownloadBytes && wctx.Err() != nil:
		why = fmt.Sprintf("cut short at the %v window: %d of %d bytes", cfg.DownloadWindow, got, cfg.DownloadBytes)
	case got < cfg.DownloadBytes:
		why = fmt.Sprintf("cut short: %d of %d bytes (%v)", got, cfg.DownloadBytes, err)
	}
	return math.Round(100*float64(got)/1e6/took.Seconds()) / 100, got, why
}

// probeCores spins one thread per advertised core (the machine's CPUs
// when nothing is advertised; on a simulated machine one, since
// availability is a per-thread share) for the CPU window.
func probeCores(ctx context.Context, cfg ProbeConfig) (cores float64, method string, workers int, err error) {
	claim := cfg.Advertised.Cores
	if claim <= 0 {
		claim = float64(runtime.NumCPU())
	}
	workers = min(int(math.Ceil(claim)), maxProbeWorkers)
	if cfg.Simulated {
		// A simulated machine short of cores is stopped as a whole, so
		// one thread sees its availability; more would only take this
		// computer's CPUs from every other simulated machine (and from
		// vastfleet, whose timing then drifts on a fast market).
		workers = 1
	}
	workers = max(workers, 1)
	if prev := runtime.GOMAXPROCS(0); prev < workers+1 {
		runtime.GOMAXPROCS(workers + 1)
		defer runtime.GOMAXPROCS(prev)
	}
	type sample struct {
		run, wait time.Duration
		wall      time.Duration
		ok        bool
		gaps      []gap // simulated: stretches the thread did not run
	}
	samples := make([]sample, workers)
	var conts *contWatch
	if cfg.Simulated {
		conts = watchConts()
		defer conts.stop()
	}
	var stop atomic.Bool
	var ready, wg sync.WaitGroup
	ready.Add(workers)
	wg.Add(workers)
	for i := range workers {
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r0, w0, ok0 := threadSched()
			t0 := time.Now()
			ready.Done()
			x := uint64(i)
			var gaps []gap
			last := t0
			for !stop.Load() {
				for range 1000 {
					x = x*6364136223846793005 + 1442695040888963407
				}
				if conts != nil {
					now := time.Now()
					if now.Sub(last) > minGap {
						gaps = append(gaps, gap{last, now})
					}
					last = now
				}
			}
			r1, w1, ok1 := threadSched()
			samples[i] = sample{run: r1 - r0, wait: w1 - w0, wall: time.Since(t0), ok: ok0 && ok1 && x != 1, gaps: gaps}
		}()
	}
	ready.Wait()
	cpu0, cpuOK0 := processCPU()
	t0 := time.Now()
	timer := time.NewTimer(cfg.CPUWindow)
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
	timer.Stop()
	stopAt := time.Now()
	stop.Store(true)
	wg.Wait()
	wall := time.Since(t0)
	cpu1, cpuOK1 := processCPU()
	if err := ctx.Err(); err != nil {
		return 0, "", workers, err
	}
	perThread := true
	for _, s := range samples {
		perThread = perThread && s.ok && s.wall > 0
	}
	switch {
	case cfg.Simulated:
		// The machine's share is the time it was not stopped: the gaps in
		// the thread's progress that a continue (SIGCONT) ended. Other gaps
		// are this computer's own load: a CPU quota throttles a thread
		// without counting the time as waiting for a CPU, so at 1,000
		// simulated machines on 2 cores an honest machine measured 2 of
		// its 11 cores by run and wait time.
		//
		// A stop that outlasted the window ended after the threads did:
		// its notice comes in the moment after.
		for _, s := range samples {
			if n := len(s.gaps); n > 0 && s.gaps[n-1].end.After(stopAt) {
				conts.await(s.gaps[n-1].start, noticeWait)
			}
		}
		resumed := conts.times()
		var avail float64
		for _, s := range samples {
			stopped := stoppedTime(s.gaps, resumed)
			avail += max(0, 1-float64(stopped)/float64(max(s.wall, 1)))
		}
		return avail / float64(workers) * claim, "availability", workers, nil
	case perThread:
		for _, s := range samples {
			cores += float64(s.run) / float64(s.wall)
		}
		return cores, "cpu-time", workers, nil
	case cpuOK0 && cpuOK1 && wall > 0:
		return float64(cpu1-cpu0) / float64(wall), "cpu-time", workers, nil
	}
	return 0, "", workers, errors.New("no CPU accounting on this system (/proc/thread-self/schedstat, getrusage)")
}

// minGap is the least stretch without progress counted as a gap: well
// under the simulator's duty period (200 ms), well over a thread's
// ordinary scheduling delays.
const minGap = 5 * time.Millisecond

// noticeWait bounds the wait for the notice of a stop that outlasted
// the CPU window: on a busy computer the notice is late.
const noticeWait = 500 * time.Millisecond

// gap is a stretch in which a spinning thread made no progress.
type gap struct{ start, end time.Time }

// stoppedTime is how much of a thread's gaps the machine was stopped:
// each continue ended one stop, begun before the continue was noticed.
// The notice is late by however long this computer takes to run the
// goroutine that reads it (on a busy one, past the next stop), so no
// fixed window ties a notice to its gap. A stop is longer than the
// scheduling delays around it: each notice takes the longest gap not
// yet taken that began before it, in the second before it. Notices
// under minGap apart are one continue (the simulator signals a machine's
// process group and its processes).
func stoppedTime(gaps []gap, resumed []time.Time) time.Duration {
	const reach = time.Second
	taken := make([]bool, len(gaps))
	var stopped time.Duration
	var prev time.Time
	for _, r := range resumed {
		if !prev.IsZero() && r.Sub(prev) < minGap {
			continue
		}
		prev = r
		best := -1
		for i, g := range gaps {
			if taken[i] || g.start.After(r) || g.end.Before(r.Add(-reach)) {
				continue
			}
			if best < 0 || g.length() > gaps[best].length() {
				best = i
			}
		}
		if best >= 0 {
			taken[best] = true
			stopped += gaps[best].length()
		}
	}
	return stopped
}

func (g gap) length() time.Duration { return g.end.Sub(g.start) }

// contWatch records when this process was continued after a stop.
type contWatch struct {
	ch   chan os.Signal
	mu   sync.Mutex
	at   []time.Time
	done chan struct{}
}

func watchConts() *contWatch {
	w := &contWatch{ch: make(chan os.Signal, 64), done: make(chan struct{})}
	signal.Notify(w.ch, procgroup.SIGCONT)
	go func() {
		defer close(w.done)
		for range w.ch {
			w.mu.Lock()
			w.at = append(w.at, time.Now())
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *contWatch) times() []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Time(nil), w.at...)
}

// await waits up to d for a continue noticed at or after t.
func (w *contWatch) await(t time.Time, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		at := w.times()
		if n := len(at); n > 0 && !at[n-1].Before(t) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func (w *contWatch) stop() {
	signal.Stop(w.ch)
	close(w.ch)
	<-w.done
}

// threadSched is the calling thread's time on a CPU and waiting for one
// (linux's schedstat).
func threadSched() (run, wait time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, false
	}
	r, err1 := strconv.ParseInt(f[0], 10, 64)
	w, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return time.Duration(r), time.Duration(w), true
}

// probeRAM allocates and touches the advertised RAM (bounded by RAMCap,
// the machine's total when nothing is advertised) in chunks, then frees it.
func probeRAM(ctx context.Context, cfg ProbeConfig) (got, target int64, err error) {
	target = cfg.RAMCap
	if mb := cfg.Advertised.RAMMB; mb > 0 {
		target = min(target, int64(mb*1e6))
	}
	var held [][]byte
	defer func() {
		held = nil
		debug.FreeOSMemory()
	}()
	for got < target {
		if err := ctx.Err(); err != nil {
			return got, target, err
		}
		n := min(int64(ramChunk), target-got)
		b := make([]byte, n)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
		got += n
	}
	return got, target, nil
}

// probeGPUs asks nvidia-smi, when it is on PATH, for the GPUs.
func probeGPUs(ctx context.Context) (n int, names []string, memMB float64, note string) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return 0, nil, 0, "nvidia-smi not found"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--query-gpu=index,name,memory.total,driver_version",
		"--format=csv,noheader,nounits").Output()
	if err != nil {
		return 0, nil, 0, "nvidia-smi: " + err.Error()
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) < 3 {
			continue
		}
		if _, err := strconv.Atoi(strings.TrimSpace(f[0])); err != nil {
			continue
		}
		n++
		names = append(names, strings.TrimSpace(f[1]))
		if n == 1 {
			memMB, _ = strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
		}
	}
	return n, names, memMB, ""
}

// probeGPUStage lists the GPUs with nvidia-smi and demands them.
func probeGPUStage(ctx context.Context, cfg ProbeConfig, r *wire.Probe) {
	r.GPUs, r.GPUNames, r.GPUMemMB, r.GPUError = probeGPUs(ctx)
	switch {
	case r.GPUs > 0 && cfg.Simulated:
		// Its nvidia-smi lists the machine's GPUs; there is no device
		// behind them to allocate on.
		r.GPUAlloc, r.GPUAllocError = wire.GPUAllocNotMeasured, "a simulated machine has no GPU to allocate on"
	case r.GPUs > 0:
		r.GPUAlloc, r.GPUAllocGPUs, r.GPUAllocMB, r.GPUAllocError = probeGPUAlloc(ctx, cfg.Python, r.GPUs, r.GPUMemMB)
	}
}

// gpuAllocScript allocates argv[1] MiB on every CUDA device, fills it and
// waits for the fill: what a spoofed NVML cannot fake. Exit 3: no torch
// with CUDA to allocate with.
const gpuAllocScript = `
import sys
try:
    import torch
except Exception as e:
    print("unavailable: no torch (%s)" % e); sys.exit(3)
if not torch.cuda.is_available():
    print("unavailable: torch sees no CUDA device"); sys.exit(3)
mb, ok, n = int(sys.argv[1]), 0, torch.cuda.device_count()
for i in range(n):
    try:
        x = torch.empty(mb << 20, dtype=torch.uint8, device="cuda:%d" % i)
        x.fill_(1); torch.cuda.synchronize(i); ok += 1; del x
    except Exception as e:
        print("device %d: %s" % (i, str(e).splitlines()[0] if str(e) else type(e).__name__))
print("allocated %d %d" % (ok, n))
`

// gpuAllocShare is how much of the memory nvidia-smi lists per GPU the
// allocation demands: most of it, short of what a driver keeps.
const gpuAllocShare = 0.8

// probeGPUAlloc demands what nvidia-smi listed: gpuAllocShare of each
// GPU's memory on every device CUDA sees, filled. listed GPUs answering
// is ok; fewer is short. Without an interpreter with torch and CUDA it is
// not measured, said so, never a pass.
func probeGPUAlloc(ctx context.Context, python string, listed int, memMB float64) (status string, gpus int, allocMB float64, why string) {
	if python == "" {
		python = "python3"
	}
	path, err := exec.LookPath(python)
	if err != nil {
		return wire.GPUAllocNotMeasured, 0, 0, "no python3 to allocate with (the agent links no CUDA)"
	}
	mb := math.Floor(gpuAllocShare * memMB)
	if mb < 1 {
		return wire.GPUAllocNotMeasured, 0, 0, "nvidia-smi lists no memory to allocate"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-c", gpuAllocScript, strconv.Itoa(int(mb)))
	out, err := cmd.CombinedOutput()
	last := lastLineOf(out)
	var ok, seen int
	if _, serr := fmt.Sscanf(last, "allocated %d %d", &ok, &seen); serr == nil && err == nil {
		status, why = wire.GPUAllocOK, ""
		if ok < listed {
			status = wire.GPUAllocShort
			why = fmt.Sprintf("%d of the %d GPUs nvidia-smi lists took %.0f MiB each (CUDA sees %d): %s", ok, listed, mb, seen, firstLines(out, 3))
		}
		return status, ok, mb, why
	}
	switch {
	case ctx.Err() != nil:
		return wire.GPUAllocNotMeasured, 0, 0, "the allocation ran past 30s"
	case strings.HasPrefix(last, "unavailable: "):
		return wire.GPUAllocNotMeasured, 0, 0, strings.TrimPrefix(last, "unavailable: ")
	}
	return wire.GPUAllocNotMeasured, 0, 0, fmt.Sprintf("the allocation failed (%v): %s", err, firstLines(out, 3))
}

// lastLineOf is out's last non-empty line, trimmed.
func lastLineOf(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// firstLines is out's first n lines on one line, bounded.
func firstLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	s := strings.Join(lines[:min(n, len(lines))], "; ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// probeDisk writes size bytes to a file in dir, syncs it, and removes it.
func probeDisk(ctx context.Context, dir string, size int64) (mbps float64, err error) {
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	start := time.Now()
	for written := int64(0); written < size; {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n, err := f.Write(buf[:min(int64(len(buf)), size-written)])
		if err != nil {
			return 0, err
		}
		written += int64(n)
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	el := time.Since(start).Seconds()
	if el <= 0 {
		return 0, nil
	}
	return float64(size) / 1e6 / el, nil
}

// probeFile is where a probe of a previous run of the agent on this
// instance is kept: a restarted agent reports it again rather than
// probing a machine that is already running sessions.
func probeFile(stateDir string) string { return filepath.Join(stateDir, "probe.json") }

// runProbe probes the machine once per instance: a restarted agent (a
// reboot, a release after parking) reports the probe it made at the
// first boot, since its machine is the same and may be busy by now.
func (a *agent) runProbe(ctx context.Context, cfg ProbeConfig) *wire.Probe {
	path := probeFile(a.cfg.StateDir)
	if b, err := os.ReadFile(path); err == nil {
		var p wire.Probe
		if json.Unmarshal(b, &p) == nil && p.Status != "" {
			return &p
		}
	}
	a.log.Info("boot probe starting", "advertised_cores", cfg.Advertised.Cores, "advertised_ram_mb", cfg.Advertised.RAMMB,
		"advertised_gpus", cfg.Advertised.GPUs, "bound", cfg.withDefaults().Timeout)
	p := RunProbe(ctx, cfg, a.cfg.StateDir)
	a.log.Info("boot probe done", "status", p.Status, "err", p.Error, "cores", p.Cores, "method", p.CoresMethod,
		"ram_bytes", p.RAMBytes, "gpus", p.GPUs, "disk_mbps", p.DiskMBps, "took_s", p.DurationS)
	if ctx.Err() == nil {
		if b, err := json.Marshal(p); err == nil {
			if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
				a.log.Warn("keeping the probe's result", "err", err)
			}
		}
	}
	return &p
}
