//go:build linux

package scalebench

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
)

// procfs reads processes from Linux's /proc.
const procfs = true

// userHZ is the unit of /proc/PID/stat's CPU times: USER_HZ, 100 on every
// architecture Go supports on Linux.
const userHZ = 100

// readProc is one look at a running process: resident memory now and its
// peak (VmHWM, for the program it runs now: an exec starts it afresh),
// open file descriptors, and its own CPU seconds.
func readProc(pid int) (procSample, bool) {
	var s procSample
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return s, false
	}
	for line := range bytes.Lines(status) {
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			s.RSS = kbField(line)
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			s.HWM = kbField(line)
		}
	}
	s.FDs = countFDs(pid)
	if st, ok := readStat(pid); ok {
		s.CPU = st.cpu
	}
	return s, true
}

// kbField is a /proc/PID/status line's "NNN kB" in bytes.
func kbField(line []byte) int64 {
	f := strings.Fields(string(line))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n << 10
}

// countFDs is how many files pid holds open; -1 when it cannot be read.
func countFDs(pid int) int {
	d, err := os.Open("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return -1
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(1024)
		n += len(names)
		if err != nil || len(names) == 0 {
			return n
		}
	}
}

// resetPeak starts pid's VmHWM again from its resident memory now, so a
// long-lived process's peak is the phase's own (Linux 4.0 and later).
func resetPeak(pid int) bool {
	return os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0) == nil
}

// statLine is what /proc/PID/stat says of one process.
type statLine struct {
	ppid   int
	zombie bool   // ended, not yet waited for: no memory, its time not yet moved
	start  uint64 // since boot, in clock ticks: with the pid, one process
	// cpu is the process's own user+system seconds; children the seconds
	// of its descendants that have ended and been waited for.
	cpu, children float64
	rss           int64 // bytes
}

func readStat(pid int) (statLine, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return statLine{}, false
	}
	// The command name, in parentheses, may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return statLine{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 22 {
		return statLine{}, false
	}
	num := func(n int) float64 { v, _ := strconv.ParseFloat(f[n-3], 64); return v }
	ppid, _ := strconv.Atoi(f[1])
	start, _ := strconv.ParseUint(f[22-3], 10, 64)
	return statLine{
		ppid:     ppid,
		zombie:   f[0] == "Z",
		start:    start,
		cpu:      (num(14) + num(15)) / userHZ,
		children: (num(16) + num(17)) / userHZ,
		rss:      int64(num(24)) * int64(os.Getpagesize()),
	}, true
}

// procKey is one process: a pid with its start time, since pids are reused.
type procKey struct {
	pid   int
	start uint64
}

// hostTracker follows the simulated machines' processes: those below the
// simulator, and those that left it (the agent's onstart starts it with
// nohup and exits, so init adopts it), known by the marker in their
// environment (sim/host sets VASTFLEET_SIM_MACHINE=ROOT/... in every one).
type hostTracker struct {
	root   int
	marker []byte

	mu   sync.Mutex
	host map[procKey]bool // membership, decided once per process
	// lone holds the last CPU seconds seen of each machine process whose
	// parent is neither the simulator nor a machine process: when it
	// ends, no machine process or the simulator waits for it, so its
	// time would be lost from the sum; gone keeps it.
	lone map[procKey]float64
	gone float64
}

func newHostTracker(root int, markerPrefix string) *hostTracker {
	return &hostTracker{root: root, marker: []byte(markerPrefix), host: map[procKey]bool{}, lone: map[procKey]float64{}}
}

// sample sums the machines' processes now: resident memory, how many,
// and the CPU seconds they have used, the ended ones included (an ended
// process's time is in its waiter's children count, or in gone).
func (t *hostTracker) sample() (treeSample, bool) {
	var ts treeSample
	rootStat, ok := readStat(t.root)
	if !ok {
		return ts, false
	}
	d, err := os.Open("/proc")
	if err != nil {
		return ts, false
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return ts, false
	}
	stats := map[int]statLine{}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == t.root {
			continue
		}
		if s, ok := readStat(pid); ok {
			stats[pid] = s
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var isHost func(pid, depth int) bool
	isHost = func(pid, depth int) bool {
		if pid == t.root {
			return true
		}
		s, ok := stats[pid]
		if !ok {
			return false
		}
		k := procKey{pid, s.start}
		if v, ok := t.host[k]; ok {
			return v
		}
		v := depth < 64 && s.ppid > 1 && isHost(s.ppid, depth+1) || t.marked(pid)
		t.host[k] = v
		return v
	}
	live := map[procKey]bool{}
	ts.CPU = rootStat.children
	for pid, s := range stats {
		k := procKey{pid, s.start}
		live[k] = true
		if !isHost(pid, 0) {
			continue
		}
		if !s.zombie {
			ts.Procs++
		}
		ts.RSS += s.rss
		ts.CPU += s.cpu + s.children
		if p, ok := stats[s.ppid]; s.ppid != t.root && (!ok || !t.host[procKey{s.ppid, p.start}]) {
			t.lone[k] = s.cpu + s.children
		}
	}
	for k, cpu := range t.lone {
		if !live[k] {
			t.gone += cpu
			delete(t.lone, k)
		}
	}
	for k := range t.host {
		if !live[k] {
			delete(t.host, k)
		}
	}
	ts.CPU += t.gone
	return ts, true
}

// marked reports whether pid's environment holds the marker.
func (t *hostTracker) marked(pid int) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	return bytes.HasPrefix(env, t.marker) || bytes.Contains(env, append([]byte{0}, t.marker...))
}

// memAvailable is MemAvailable of /proc/meminfo: what this computer can
// still give without swapping, in bytes.
func memAvailable() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(b) {
		if bytes.HasPrefix(line, []byte("MemAvailable:")) {
			return kbField(line), true
		}
	}
	return 0, false
}
