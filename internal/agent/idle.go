package agent

import (
	"context"
	"errors"
	"time"
)

// ErrIdle is what Run returns after the agent stopped its instance because
// its CPU and GPU stayed below the idle share for the idle time (the
// teardown ladder's idle rung).
var ErrIdle = errors.New("this instance stayed idle for its idle time and stopped itself")

// cpuUsed is the CPU time the container has used so far and the cores it
// may use: from the cgroup's cpu.stat and cpu.max, or from /proc/stat's
// busy jiffies (USER_HZ, 100 a second) over the machine's CPUs.
func (s *sampler) cpuUsed() (seconds, cores float64, ok bool) {
	if s.cgroup != "" {
		us, ok := s.cgroupUsage()
		return us / 1e6, s.cores(), ok
	}
	busy, _, ok := s.procStat()
	return busy / 100, float64(s.procCPUs()), ok
}

// gpuUtil is the mean utilisation of the machine's GPUs, and whether it
// has any nvidia-smi lists.
func (s *sampler) gpuUtil(ctx context.Context) (float64, bool) {
	if s.nvidiaSMI == "" {
		return 0, false
	}
	gpus := s.gpus(ctx)
	if len(gpus) == 0 {
		return 0, false
	}
	sum := 0.0
	for _, g := range gpus {
		sum += g.UtilPercent
	}
	return sum / float64(len(gpus)), true
}

// usageSample is one look at the machine's use, for the idle rung.
type usageSample struct {
	at     time.Time
	cpuS   float64 // CPU seconds used so far
	gpu    float64 // mean GPU utilisation now, percent
	hasGPU bool
}

// idleRung judges the idle rung over the samples it is given: idle once
// the samples span the whole window and, over the last window of them,
// CPU time averaged below `below` percent of the cores and every GPU
// sample was below it too. An average, not every sample: the container's
// CPU counter may advance in steps coarser than the sampling (a
// simulated machine's is updated every few seconds), and a step must not
// read as idle between steps.
type idleRung struct {
	window time.Duration
	below  float64
	cores  float64
	s      []usageSample
}

// add records a sample and says whether the window is idle.
func (w *idleRung) add(u usageSample) bool {
	w.s = append(w.s, u)
	// Keep one sample at or before the window's start: the baseline.
	cut := 0
	for cut+1 < len(w.s) && !w.s[cut+1].at.After(u.at.Add(-w.window)) {
		cut++
	}
	w.s = w.s[cut:]
	first := w.s[0]
	span := u.at.Sub(first.at)
	if len(w.s) < 2 || span < w.window {
		return false
	}
	if w.cores <= 0 || u.cpuS < first.cpuS {
		return false // a counter that went back: not known, so not idle
	}
	if pct := (u.cpuS - first.cpuS) / (span.Seconds() * w.cores) * 100; pct >= w.below {
		return false
	}
	for _, x := range w.s[1:] {
		if x.hasGPU && x.gpu >= w.below {
			return false
		}
	}
	return true
}

// idleStep is how often the idle rung samples: a tenth of its window of
// wall time, between a fifth of a second and a minute.
func idleStep(window time.Duration) time.Duration {
	return min(max(window/10, 200*time.Millisecond), time.Minute)
}

// watchIdle samples the machine's use from the start of the sessions and
// closes the returned channel once the idle rung is due; never when the
// rung is off.
func (a *agent) watchIdle(ctx context.Context) <-chan struct{} {
	due := make(chan struct{})
	if a.cfg.IdleAfter <= 0 {
		return due
	}
	window := a.cfg.wall(a.cfg.IdleAfter)
	s := newSampler(a.cfg.Cgroup, "/proc", a.cfg.StateDir)
	w := &idleRung{window: window, below: a.cfg.IdleBelow}
	a.log.Info("idle rung armed", "idle_after", a.cfg.IdleAfter, "idle_below_percent", a.cfg.IdleBelow, "window_wall", window)
	go func() {
		t := time.NewTicker(idleStep(window))
		defer t.Stop()
		for {
			cpuS, cores, ok := s.cpuUsed()
			if ok {
				w.cores = cores
				gpu, hasGPU := s.gpuUtil(ctx)
				if w.add(usageSample{at: time.Now(), cpuS: cpuS, gpu: gpu, hasGPU: hasGPU}) {
					close(due)
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return due
}
