package host

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A container on vast reads its own CPU use from its cgroup
// (/sys/fs/cgroup/cpu.stat) and its quota from cpu.max. A simulated
// machine's processes share this computer's, so each machine gets a
// directory in those formats, named to its processes by cgroupEnv:
// cpu.max holds its advertised cores, and cpu.stat the CPU time its
// processes used, kept by one pass over /proc every cpuStatEvery. What an
// agent measures of its machine (the idle rung above all) is then that
// machine's use, not this computer's.
//
// The count errs on the busy side: a process seen by a pass and later
// waited for by another of the machine's processes is counted in both
// (its own time, then its parent's children's time); a process that
// lived between two passes and was waited for by one of the machine's is
// counted once, through its parent.

// cgroupEnv is the variable the agent reads its cgroup directory from.
const cgroupEnv = "VASTFLEET_CGROUP"

// cpuStatEvery is how often the machines' cpu.stat files are brought up
// to date.
const cpuStatEvery = time.Second

// userHZ is the unit of /proc/PID/stat's CPU times (USER_HZ on Linux).
const userHZ = 100

// cgroupDir is the machine's simulated cgroup directory, beside its /root.
func (m *Manager) cgroupDir(id int64) string {
	return filepath.Join(m.root, strconv.FormatInt(id, 10), "sys", "fs", "cgroup")
}

// writeCgroup lays down the machine's cgroup directory at boot: its quota
// and a cpu.stat at zero (a new boot is a new container).
func (m *Manager) writeCgroup(id int64, hw Hardware) error {
	dir := m.cgroupDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	quota := "max 100000"
	if hw.Cores > 0 {
		quota = fmt.Sprintf("%d 100000", int64(hw.Cores*100000))
	}
	if err := replaceFile(filepath.Join(dir, "cpu.max"), quota+"\n"); err != nil {
		return err
	}
	return replaceFile(filepath.Join(dir, "cpu.stat"), cpuStat(0))
}

func cpuStat(ticks float64) string {
	return fmt.Sprintf("usage_usec %d\n", int64(ticks*1e6/userHZ))
}

// replaceFile writes path whole by a rename, so that a reader never sees
// it half written; it is not synced (nothing of it outlives the machine).
func replaceFile(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// cpuAccount keeps the machines' CPU time between passes.
type cpuAccount struct {
	mu      sync.Mutex
	running bool
	done    chan struct{} // closed by stopCPU
	wg      sync.WaitGroup
	procs   map[int]procCPU    // a marked process seen by the last pass
	usage   map[string]float64 // a boot's marker → its CPU ticks so far
	written map[string]float64 // what its cpu.stat says
}

// procCPU is a marked process as a pass saw it: its start (to tell a
// reused pid), its machine's boot and its CPU ticks with its waited-for
// children's.
type procCPU struct {
	start  string
	marker string
	ticks  float64
}

// countCPU starts the passes, if they are not running; they end when no
// machine runs.
func (m *Manager) countCPU() {
	a := &m.cpu
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running {
		return
	}
	a.running = true
	done := make(chan struct{})
	a.done = done
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		t := time.NewTicker(cpuStatEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if !m.cpuPass() {
				return
			}
		}
	}()
}

// stopCPU ends the passes and waits for them.
func (m *Manager) stopCPU() {
	a := &m.cpu
	a.mu.Lock()
	if a.running {
		close(a.done)
		a.running = false
	}
	a.mu.Unlock()
	a.wg.Wait()
}

// cpuPass brings every running machine's cpu.stat up to date; false when
// none runs (and the passes end).
func (m *Manager) cpuPass() bool {
	a := &m.cpu
	m.mu.Lock()
	boots := make(map[string]int64, len(m.running)) // marker → machine
	for id, mc := range m.running {
		boots[mc.marker] = id
	}
	closed := m.closed
	m.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if closed || len(boots) == 0 || !a.running {
		a.running = false
		a.procs, a.usage, a.written = nil, nil, nil
		return false
	}
	if a.procs == nil {
		a.procs, a.usage, a.written = map[int]procCPU{}, map[string]float64{}, map[string]float64{}
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true // no /proc: cpu.stat stays at zero
	}
	seen := make(map[int]procCPU, len(a.procs))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		start, ticks, ok := procTimes(pid)
		if !ok {
			continue
		}
		p, known := a.procs[pid]
		if !known || p.start != start {
			// Only a marked process is kept: an unmarked one may be a
			// fork of this simulator about to exec a machine's command,
			// so it is read again next pass.
			marker := procMarker(pid)
			if _, ok := boots[marker]; !ok {
				continue
			}
			p = procCPU{start: start, marker: marker}
		}
		if _, ok := boots[p.marker]; !ok {
			continue // its machine stopped or booted again
		}
		if d := ticks - p.ticks; d > 0 {
			a.usage[p.marker] += d
		}
		p.ticks = ticks
		seen[pid] = p
	}
	a.procs = seen
	for marker, id := range boots {
		u := a.usage[marker]
		if w, ok := a.written[marker]; ok && w == u {
			continue
		}
		if err := replaceFile(filepath.Join(m.cgroupDir(id), "cpu.stat"), cpuStat(u)); err == nil {
			a.written[marker] = u
		}
	}
	for marker := range a.usage {
		if _, ok := boots[marker]; !ok {
			delete(a.usage, marker)
			delete(a.written, marker)
		}
	}
	return true
}

// procTimes reads a process's start time and its CPU ticks (user and
// system, its own and its waited-for children's) from /proc/PID/stat.
func procTimes(pid int) (start string, ticks float64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, false
	}
	// After the command: state is field 3 overall, utime 14, stime 15,
	// cutime 16, cstime 17, starttime 22.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", 0, false
	}
	for _, s := range f[11:15] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return "", 0, false
		}
		ticks += v
	}
	return f[19], ticks, true
}

// procMarker is the machine marker in a process's environment, or "".
func procMarker(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return ""
	}
	for entry := range strings.SplitSeq(string(b), "\x00") {
		if strings.HasPrefix(entry, markerKey) {
			return entry // the whole entry, as machine.marker holds it
		}
	}
	return ""
}
