package host

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/procgroup"
)

// The capacity model (Hardware.Scale > 0) makes each machine's workload
// run at its true cores over a fixed scale: Scale simulated cores to one
// of this computer's. Without it every machine's processes share this
// computer's cores alike, so a fleet's hashes are this computer's
// whatever it rents; with it a 64-core machine delivers 64/Scale of a
// core and a 16-core one 16/Scale, whatever else runs.
//
// It is two CPU cgroups (v1's cpu controller) per machine:
// <cpu>/vastfleet-sim-<root>/m<id>-<boot> holds the onstart (capped at
// the budget and an allowance, svcAllowance), and
// <cpu>/vastfleet-sim-<root>-work/m<id>-<boot> the workload:
// cpu.cfs_quota_us caps it at its budget, and cpu.shares in proportion
// to the budget divide this computer fairly when it cannot give every
// machine its budget (a loaded computer slows every machine alike
// instead of levelling them). The workloads' parent weighs high, so
// that other work on this computer does not starve the fleet below its
// capped budgets; the machines' own parent weighs as one ordinary
// process each, so that their agents neither starve the simulator (its
// SSH servers) and the coordinator nor are starved by them.
//
// The workload is every process of the machine outside the onstart's
// process group, moved into work/ by the manager's mover (moveWork): the sessions the agent starts (each in a group of its
// own) and whatever left the group (tmux). The onstart's own group (the
// agent under nohup, and its boot probe) and SSH sessions run unscaled:
// their deadlines are wall time against a coordinator and a client that
// are not scaled, and they use little CPU; the probe keeps seeing the
// spoofing duty cycle (hardware.go), which in this model stops only
// them. A workload started over SSH is not scaled.

// capacityRescan is how often a machine's cgroup is looked at for new
// processes to move into work/: a session's first command (the run
// session's wait for the go marker) is moved long before it forks the
// work.
const capacityRescan = 50 * time.Millisecond

// svcAllowance is what the machine's cgroup may use beyond its
// workload's budget: the onstart, the agent and its probe (whose reading
// of a simulated machine is its stops, not its CPU time), and a process
// of the workload for the moment before it is moved. That moment was
// seconds when 50 sessions started at once (each move takes the
// kernel's cgroup lock), so it is small; stopping the processes found
// first instead hung agents whose exec (a vfork) it caught. It bounds what the
// fleet takes from this computer, so that the simulator moving them is
// never starved by them.
const svcAllowance = 0.03

// cfs bounds: the kernel takes a quota of at least 1 ms in a period of
// at most 1 s.
const (
	cfsPeriod    = 100 * time.Millisecond
	cfsMaxPeriod = time.Second
	cfsMinQuota  = time.Millisecond
)

// CPUBudget is the share of one of this computer's cores the machine's
// workload gets under the capacity model, 0 without it.
func (h Hardware) CPUBudget() float64 {
	if h.Scale <= 0 {
		return 0
	}
	cores := h.Cores
	if h.TrueCores > 0 && h.TrueCores < cores {
		cores = h.TrueCores
	}
	return cores / h.Scale
}

// cfsQuota is the period and quota that give budget: the period grows
// (to 1 s) for a budget under 1 ms per 100 ms; below 1 ms a second the
// budget is raised to it.
func cfsQuota(budget float64) (period, quota time.Duration) {
	period = cfsPeriod
	if q := time.Duration(budget * float64(period)); q < cfsMinQuota {
		period = min(cfsMaxPeriod, time.Duration(float64(cfsMinQuota)/budget))
	}
	return period, max(cfsMinQuota, time.Duration(budget*float64(period)))
}

// cpuShares is the work cgroup's weight: in proportion to its budget.
func cpuShares(budget float64) int64 {
	return min(262144, max(2, int64(math.Round(budget*100000))))
}

// capacityRoot is this computer's cgroup v1 cpu hierarchy.
var capacityRoot = "/sys/fs/cgroup/cpu"

// capacityCgroups are the manager's two cgroup directories, made if need
// be (the last machine's stop removes them): svc holds each machine's
// onstart (the agent), weighted as that many ordinary processes, and
// work each machine's capped workload, weighted high so that other work
// on this computer does not starve the fleet below its budgets (which
// their quotas cap). An error says the capacity model cannot run here.
func (m *Manager) capacityCgroups() (svc, work string, err error) {
	m.capOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(capacityRoot, "cpu.cfs_quota_us")); err != nil {
			m.capErr = fmt.Errorf("no cgroup v1 cpu controller at %s", capacityRoot)
			return
		}
		h := fnv.New32a()
		h.Write([]byte(m.root))
		m.capDir = filepath.Join(capacityRoot, fmt.Sprintf("vastfleet-sim-%08x", h.Sum32()))
		// A simulator killed before its machines' cgroups went left
		// them: those left empty go now.
		old, _ := filepath.Glob(filepath.Join(m.capDir, "m*"))
		for _, d := range old {
			(&capacity{dir: d, work: filepath.Join(m.capDir+"-work", filepath.Base(d))}).remove()
		}
	})
	if m.capErr != nil {
		return "", "", m.capErr
	}
	svc, work = m.capDir, m.capDir+"-work"
	for _, d := range []string{svc, work} {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", "", err
		}
	}
	return svc, work, writeCg(work, "cpu.shares", "262144")
}

// weighSvc weighs the machines' own cgroups as one ordinary process each.
func weighSvc(svc string) {
	ms, _ := filepath.Glob(filepath.Join(svc, "m*"))
	_ = writeCg(svc, "cpu.shares", strconv.Itoa(min(262144, max(2, 1024*len(ms)))))
}

// capacity is a machine's cgroups under the model.
type capacity struct {
	dir  string // the machine's: the onstart's processes
	work string // the workload's
	once sync.Once
	mgr  *Manager
	// removing is the manager's count of cgroups being removed, which
	// its Close waits for: a process that exits leaves none behind.
	removing *sync.WaitGroup
}

func writeCg(dir, file, v string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644)
}

// newCapacity makes the machine's cgroups for budget.
func (m *Manager) newCapacity(id int64, budget float64) (*capacity, error) {
	svc, work, err := m.capacityCgroups()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("m%d-%d", id, time.Now().UnixNano())
	c := &capacity{dir: filepath.Join(svc, name), work: filepath.Join(work, name), removing: &m.capRemoving, mgr: m}
	period, quota := cfsQuota(budget)
	mkdir := func(d string) func() error {
		return func() error {
			err := os.Mkdir(d, 0o755)
			if errors.Is(err, os.ErrNotExist) {
				// The last machine's stop removed the parents meanwhile.
				if _, _, err = m.capacityCgroups(); err == nil {
					err = os.Mkdir(d, 0o755)
				}
			}
			return err
		}
	}
	for _, step := range []func() error{
		mkdir(c.dir),
		func() error {
			p, q := cfsQuota(budget + svcAllowance)
			if err := writeCg(c.dir, "cpu.cfs_period_us", strconv.FormatInt(p.Microseconds(), 10)); err != nil {
				return err
			}
			return writeCg(c.dir, "cpu.cfs_quota_us", strconv.FormatInt(q.Microseconds(), 10))
		},
		mkdir(c.work),
		func() error { return writeCg(c.work, "cpu.shares", strconv.FormatInt(cpuShares(budget), 10)) },
		func() error {
			return writeCg(c.work, "cpu.cfs_period_us", strconv.FormatInt(period.Microseconds(), 10))
		},
		func() error { return writeCg(c.work, "cpu.cfs_quota_us", strconv.FormatInt(quota.Microseconds(), 10)) },
	} {
		if err := step(); err != nil {
			c.remove()
			return nil, err
		}
	}
	weighSvc(svc)
	return c, nil
}

// wrap is the onstart's command line: the shell puts itself into the
// machine's cgroup before it runs the script, so that nothing it forks
// is left outside.
func (c *capacity) wrap(shell, script string) []string {
	return []string{shell, "-c", `echo $$ >"$0" && exec "$1" -c "$2"`, filepath.Join(c.dir, "cgroup.procs"), shell, script}
}

// watch has the manager's mover move each process of the machine's
// cgroup outside the onstart's group pgid into work/, until stop.
func (c *capacity) watch(pgid int) {
	m := c.mgr
	m.capMu.Lock()
	defer m.capMu.Unlock()
	if m.capWatched == nil {
		m.capWatched = map[*capacity]int{}
	}
	m.capWatched[c] = pgid
	if !m.capMoving {
		m.capMoving = true
		go m.moveWork()
	}
}

// moveWork is the manager's mover: one thread for every machine, at a
// high priority where it may have one, since a process not yet moved
// runs at its machine's allowance, not its budget, and on a loaded
// computer an ordinary thread is late by seconds.
func (m *Manager) moveWork() {
	// Locked, and never unlocked: the thread, its priority raised, ends
	// with the mover instead of running other goroutines.
	runtime.LockOSThread()
	raiseThreadPriority()
	t := time.NewTicker(capacityRescan)
	defer t.Stop()
	for range t.C {
		m.capMu.Lock()
		if len(m.capWatched) == 0 {
			m.capMoving = false
			m.capMu.Unlock()
			return
		}
		watched := maps.Clone(m.capWatched)
		m.capMu.Unlock()
		for c, pgid := range watched {
			c.moveWork(pgid)
		}
	}
}

func (c *capacity) moveWork(pgid int) {
	for _, pid := range cgroupPIDs(c.dir) {
		if g, err := procgroup.GroupOf(pid); err == nil && g != pgid {
			// A process gone meanwhile fails to move: nothing to do.
			_ = writeCg(c.work, "cgroup.procs", strconv.Itoa(pid))
		}
	}
}

// workPIDs are the processes of the machine's workload.
func (c *capacity) workPIDs() map[int]bool {
	out := map[int]bool{}
	for _, p := range cgroupPIDs(c.work) {
		out[p] = true
	}
	return out
}

// stop ends the watch and removes the cgroups once their processes have
// gone (the machine's are being killed), in the background.
func (c *capacity) stop() {
	c.once.Do(c.stopOnce)
}

func (c *capacity) stopOnce() {
	c.mgr.capMu.Lock()
	delete(c.mgr.capWatched, c)
	c.mgr.capMu.Unlock()
	c.removing.Add(1)
	go func() {
		defer c.removing.Done()
		for range 100 {
			if c.remove() {
				// The manager's go with its last machine's.
				weighSvc(filepath.Dir(c.dir))
				_ = os.Remove(filepath.Dir(c.dir))
				_ = os.Remove(filepath.Dir(c.work))
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

// remove removes the cgroups; false while processes are left in them.
func (c *capacity) remove() bool {
	err1 := os.Remove(c.work)
	err2 := os.Remove(c.dir)
	gone := func(err error) bool { return err == nil || errors.Is(err, os.ErrNotExist) }
	return gone(err1) && gone(err2)
}

// cgroupPIDs are the processes in a cgroup directory.
func cgroupPIDs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for f := range strings.FieldsSeq(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out
}
