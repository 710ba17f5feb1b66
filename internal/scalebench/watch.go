package scalebench

import (
	"os"
	"sync"
	"time"
)

// procSample is one look at a process (proc_linux.go): resident memory
// and its peak (bytes), open files (-1: unknown), CPU seconds.
type procSample struct {
	RSS, HWM int64
	FDs      int
	CPU      float64
}

// treeSample is the processes below one, together.
type treeSample struct {
	RSS   int64
	Procs int
	CPU   float64
}

// Sampling periods: the phase's command every tick (a command may last
// a fraction of a second), the coordinator and the simulator every
// longEvery ticks, the simulated machines' processes (a walk of /proc)
// every treeEvery ticks.
const (
	tick      = 20 * time.Millisecond
	longEvery = 10
	treeEvery = 100
)

// peak is the most one process was seen to hold.
type peak struct {
	rss  int64
	fds  int
	seen bool
}

func (p *peak) add(s procSample, useHWM bool) {
	p.rss = max(p.rss, s.RSS)
	if useHWM {
		p.rss = max(p.rss, s.HWM)
	}
	p.fds = max(p.fds, s.FDs)
	p.seen = true
}

// watcher measures one phase: the command it runs (once started), the
// coordinator, the simulator and its machines' processes, and this
// computer's available memory, which past the floor stops the phase.
type watcher struct {
	b      *bench
	cancel func()

	mu         sync.Mutex
	cmdPID     int
	cmd        peak
	coord, sim peak
	// reset: the long-lived process's VmHWM was restarted at the phase's
	// start, so it is the phase's own peak.
	coordReset, simReset bool
	hostsRSS             int64
	hostsProcs           int
	memMin               int64 // -1: unknown
	memHit               bool

	selfHWM                    int64 // this process's peak when the phase started
	coordCPU, simCPU, hostsCPU float64
	coordOK, simOK, hostsOK    bool

	stop chan struct{}
	done chan struct{}
}

// watch starts measuring; cancel stops the phase at the memory floor.
func (b *bench) watch(cancel func()) *watcher {
	w := &watcher{b: b, cancel: cancel, memMin: -1, stop: make(chan struct{}), done: make(chan struct{})}
	if s, ok := readProc(os.Getpid()); ok {
		w.selfHWM = s.HWM
	}
	w.coordReset = resetPeak(b.coord.Process.Pid)
	w.simReset = resetPeak(b.sim.Process.Pid)
	if s, ok := readProc(b.coord.Process.Pid); ok {
		w.coordCPU, w.coordOK = s.CPU, true
	}
	if s, ok := readProc(b.sim.Process.Pid); ok {
		w.simCPU, w.simOK = s.CPU, true
	}
	if t, ok := b.hosts.sample(); ok {
		w.hostsCPU, w.hostsOK = t.CPU, true
		w.hostsRSS, w.hostsProcs = t.RSS, t.Procs
	}
	w.sample(true, false)
	go w.loop()
	return w
}

func (w *watcher) setCmd(pid int) {
	w.mu.Lock()
	w.cmdPID = pid
	w.mu.Unlock()
	w.sample(false, false) // a command that ends within a tick is still seen
}

func (w *watcher) loop() {
	defer close(w.done)
	t := time.NewTicker(tick)
	defer t.Stop()
	for i := 1; ; i++ {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.sample(i%longEvery == 0, i%treeEvery == 0)
		}
	}
}

// sample looks at the command, with long at the coordinator, the
// simulator and the available memory, and with tree at the machines'
// processes.
func (w *watcher) sample(long, tree bool) {
	w.mu.Lock()
	pid := w.cmdPID
	w.mu.Unlock()
	var cmd, coord, sim procSample
	var cmdOK, coordOK, simOK, treeOK, memOK bool
	if pid != 0 {
		cmd, cmdOK = readProc(pid)
	}
	var avail int64
	if long || tree {
		coord, coordOK = readProc(w.b.coord.Process.Pid)
		sim, simOK = readProc(w.b.sim.Process.Pid)
		avail, memOK = memAvailable()
	}
	var t treeSample
	if tree {
		t, treeOK = w.b.hosts.sample()
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if cmdOK {
		w.cmd.add(cmd, true)
	}
	if coordOK {
		w.coord.add(coord, w.coordReset)
	}
	if simOK {
		w.sim.add(sim, w.simReset)
	}
	if treeOK {
		w.hostsRSS = max(w.hostsRSS, t.RSS)
		w.hostsProcs = max(w.hostsProcs, t.Procs)
	}
	if memOK {
		if w.memMin < 0 || avail < w.memMin {
			w.memMin = avail
		}
		if w.b.cfg.MemFloor > 0 && avail < w.b.cfg.MemFloor && !w.memHit {
			w.memHit = true
			w.cancel()
		}
	}
}

func (w *watcher) memHitNow() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.memHit
}

// end stops measuring and writes the phase's usage: ps is the command's
// ended process (nil for a phase without one).
func (w *watcher) end(p *Phase, ps *os.ProcessState) {
	close(w.stop)
	<-w.done
	w.sample(true, false)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.memMin >= 0 {
		p.MemAvailableMinMB = ptr(mb(w.memMin))
	}
	if ps != nil {
		u := Usage{Process: ProcVastfleet, CPUS: ptr(round3((ps.UserTime() + ps.SystemTime()).Seconds()))}
		// rusage's peak is at least this process's at the start (the
		// child began with its memory mapped): above that it is the
		// child's own.
		rss := int64(0)
		if r := PeakRSS(ps); r > w.selfHWM {
			rss = r
		}
		if w.cmd.seen {
			rss = max(rss, w.cmd.rss)
			u.PeakFDs = ptr(w.cmd.fds)
		} else if !procfs {
			rss = PeakRSS(ps)
		}
		if rss > 0 {
			u.PeakRSSMB = ptr(mb(rss))
		}
		p.Usage = append(p.Usage, u)
	}
	long := func(name string, pk peak, cpu0 float64, cpuOK bool, pid int) Usage {
		u := Usage{Process: name}
		if s, ok := readProc(pid); ok && cpuOK {
			u.CPUS = ptr(max(0, round3(s.CPU-cpu0)))
		}
		if pk.seen {
			u.PeakRSSMB, u.PeakFDs = ptr(mb(pk.rss)), ptr(pk.fds)
		}
		return u
	}
	p.Usage = append(p.Usage,
		long(ProcCoord, w.coord, w.coordCPU, w.coordOK, w.b.coord.Process.Pid),
		long(ProcSim, w.sim, w.simCPU, w.simOK, w.b.sim.Process.Pid))
	hosts := Usage{Process: ProcHosts}
	if t, ok := w.b.hosts.sample(); ok && w.hostsOK {
		hosts.CPUS = ptr(max(0, round3(t.CPU-w.hostsCPU)))
		hosts.PeakRSSMB, hosts.Procs = ptr(mb(w.hostsRSS)), ptr(w.hostsProcs)
	}
	p.Usage = append(p.Usage, hosts)
}

func ptr[T any](v T) *T { return &v }
