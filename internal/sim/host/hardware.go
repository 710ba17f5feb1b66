package host

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vastfleet/vastfleet/internal/procgroup"
)

// Hardware is what a machine truly has, beside what its offer advertises.
// Every simulated machine shares this computer's CPUs, memory and (no)
// GPUs; the model keeps two things honest all the same:
//
//   - CPU: a machine whose true cores are below its advertised ones runs
//     its processes only TrueCores/Cores of the time. A governor stops and
//     continues them (SIGSTOP/SIGCONT, as cpulimit does) in a
//     DutyPeriod cycle, since cgroups are rarely writable. An honest
//     machine is never stopped: what it gets is what this computer's
//     scheduler gives any process. So a probe that measures the share of
//     time its threads may run (on a CPU or in the run queue) measures the
//     true share; the absolute speed of a simulated core is this
//     computer's, divided among every machine busy at once.
//   - GPUs: a simulated nvidia-smi on the machine's PATH lists its true
//     GPUs, in the real tool's formats (-L and --query-gpu).
//
// The duty cycle keeps a short machine's share but not its speed: an
// honest machine is as fast as any other, whatever its cores, and what
// a short one is stopped for goes to the others. The capacity model
// (Scale > 0, capacity.go) gives speed too: each machine's workload runs
// at its true cores over a fixed scale, TrueCores/Scale of one of this
// computer's cores (a CPU cgroup's quota, with shares in proportion), so
// that a fleet delivers in proportion to the cores it truly rents. It
// treats the workload as using every core it has (a job sized to its
// nproc), and leaves the onstart's process group (the agent, its probe)
// and SSH sessions unscaled: the probe still sees the duty cycle, which
// under the model stops only them.
//
// RAM is not enforced (no cgroups): TrueRAMMB is recorded for the model
// and its tests only.
type Hardware struct {
	Cores     float64 // advertised effective cores
	TrueCores float64 // what the machine truly delivers; 0 or ≥ Cores: honest
	// Scale > 0 turns the capacity model on: simulated cores to one of
	// this computer's.
	Scale     float64
	RAMMB     float64 // advertised
	TrueRAMMB float64
	GPUs      []GPU // the machine's true GPUs, what nvidia-smi reports
}

// GPU is one simulated GPU as nvidia-smi shows it.
type GPU struct {
	Name   string // as the real tool names it: "NVIDIA GeForce RTX 4090"
	MemMiB int
	Driver string
	UUID   string
}

// Duty is the share of wall time the machine's processes may run.
func (h Hardware) Duty() float64 {
	if h.TrueCores <= 0 || h.Cores <= 0 || h.TrueCores >= h.Cores {
		return 1
	}
	return h.TrueCores / h.Cores
}

// DutyPeriod is the governor's cycle: short enough that a probe of a
// second or two sees many cycles, long enough that signalling a few
// machines' processes costs little.
const DutyPeriod = 200 * time.Millisecond

// rescanEvery is how often the governor looks for the machine's processes
// (those that left its process groups are found by their marker).
const rescanEvery = time.Second

// governor duty-cycles a machine's processes; stop ends it and leaves
// every process continued.
type governor struct {
	done chan struct{}
	wg   sync.WaitGroup
}

func (mc *machine) startGovernor(duty float64) {
	if duty >= 1 {
		return
	}
	g := &governor{done: make(chan struct{})}
	mc.gov = g
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		var pids []int
		var scanned time.Time
		// A process signalled with its group is not signalled again: a
		// probe counts each continue as the end of one stop.
		signal := func(sig syscall.Signal) {
			mc.mu.Lock()
			groups := maps.Clone(mc.pgids)
			mc.mu.Unlock()
			for p := range groups {
				procgroup.Kill(p, sig)
			}
			for _, p := range pids {
				if g, err := procgroup.GroupOf(p); err == nil && groups[g] {
					continue
				}
				procgroup.Signal(p, sig)
			}
		}
		defer signal(procgroup.SIGCONT)
		wait := func(d time.Duration) bool {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-g.done:
				return false
			case <-t.C:
				return true
			}
		}
		// The cycle keeps account: what it ran beyond its share (a late
		// wake-up on a busy computer) comes off the next run, so the
		// share holds on average, not only when the timers are punctual.
		start := time.Now()
		var ran time.Duration
		for {
			if time.Since(scanned) >= rescanEvery {
				prev := pids
				pids, scanned = procgroup.MarkedPIDs(mc.marker), time.Now()
				if mc.cap != nil {
					// Under the capacity model the workload's share is its
					// budget (capacity.go), already of its true cores. A
					// process stopped before it was moved there is
					// continued: nothing else would.
					work := mc.cap.workPIDs()
					pids = slices.DeleteFunc(pids, func(p int) bool { return work[p] })
					for _, p := range prev {
						if work[p] {
							procgroup.Signal(p, procgroup.SIGCONT)
						}
					}
				}
			}
			end := time.Since(start) + DutyPeriod
			target := time.Duration(duty * float64(end))
			// Neither a shortfall nor an excess carries past a cycle or so.
			ran = min(max(ran, target-DutyPeriod), target+DutyPeriod/2)
			if runFor := target - ran; runFor > 0 {
				t := time.Now()
				signal(procgroup.SIGCONT)
				ok := wait(runFor)
				signal(procgroup.SIGSTOP)
				// A thread waiting for a CPU when the stop is sent runs
				// on until it gets one: the run lasts until all stopped.
				allStopped(pids, t.Add(runFor+DutyPeriod/4))
				ran += time.Since(t)
				if !ok {
					return
				}
			}
			if rest := end - time.Since(start); rest > 0 && !wait(rest) {
				return
			}
		}
	}()
}

// allStopped waits (polling, until deadline at the latest) for every
// thread of pids to show stopped in /proc; off linux it returns at once.
func allStopped(pids []int, deadline time.Time) {
	for {
		running := false
		for _, p := range pids {
			tasks, err := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
			if err != nil {
				continue // gone, or no /proc
			}
			for _, tk := range tasks {
				b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/task/" + tk.Name() + "/stat")
				if err != nil {
					continue
				}
				// The state follows the command's closing parenthesis.
				if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
					if st := b[i+2]; st != 'T' && st != 't' && st != 'Z' && st != 'X' {
						running = true
						break
					}
				}
			}
			if running {
				break
			}
		}
		if !running || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// stopGovernor ends the duty cycle, the machine's processes continued.
func (mc *machine) stopGovernor() {
	if mc.gov == nil {
		return
	}
	close(mc.gov.done)
	mc.gov.wg.Wait()
	mc.gov = nil
}

// binDir holds the machine's simulated tools, first on its PATH; it is
// beside the instance's /root, so the user's files never hold it.
func (m *Manager) binDir(id int64) string {
	return filepath.Join(m.root, strconv.FormatInt(id, 10), "usr", "bin")
}

// writeTools lays down the simulated nvidia-smi of a machine with GPUs.
func (m *Manager) writeTools(id int64, hw Hardware) error {
	dir := m.binDir(id)
	if len(hw.GPUs) == 0 {
		err := os.Remove(filepath.Join(dir, "nvidia-smi"))
		if os.IsNotExist(err) {
			err = nil
		}
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(NvidiaSMIScript(hw.GPUs)), 0o700)
}

// NvidiaSMIScript is a POSIX shell stand-in for nvidia-smi listing gpus:
// `-L`, `--query-gpu=F,... --format=csv[,noheader][,nounits]` (with the
// real tool's field names, header and units) and a short table without
// arguments. Utilisation and memory used read 0: nothing runs on a
// simulated GPU.
func NvidiaSMIScript(gpus []GPU) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# nvidia-smi of a vastfleet simulated machine: its true GPUs.\n")
	fmt.Fprintf(&b, "count=%d\n", len(gpus))
	b.WriteString("gpu() {\n\tcase $1 in\n")
	for i, g := range gpus {
		fmt.Fprintf(&b, "\t%d) name=%s mem=%d driver=%s uuid=%s ;;\n", i,
			shQuote(g.Name), g.MemMiB, shQuote(g.Driver), shQuote(g.UUID))
	}
	b.WriteString("\tesac\n}\n")
	b.WriteString(nvidiaSMIBody)
	return b.String()
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// nvidiaSMIBody parses the arguments the way the real tool does for the
// forms it supports; the units and headers are the real tool's.
const nvidiaSMIBody = `query= list= header=1 units=1 fmt=
for a in "$@"; do
	case $a in
	-L|--list-gpus) list=1 ;;
	--query-gpu=*) query=${a#--query-gpu=} ;;
	--format=*) fmt=${a#--format=}
		case ",$fmt," in *,noheader,*) header= ;; esac
		case ",$fmt," in *,nounits,*) units= ;; esac ;;
	*) echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help." >&2; exit 2 ;;
	esac
done
if [ -n "$list" ]; then
	i=0
	while [ $i -lt $count ]; do gpu $i; echo "GPU $i: $name (UUID: $uuid)"; i=$((i+1)); done
	exit 0
fi
if [ -z "$query" ]; then
	echo "+-----------------------------------------------------------------------------+"
	gpu 0; echo "| NVIDIA-SMI (vastfleet simulator)   Driver Version: $driver"
	i=0
	while [ $i -lt $count ]; do gpu $i; echo "| $i  $name  0MiB / ${mem}MiB  0%"; i=$((i+1)); done
	echo "+-----------------------------------------------------------------------------+"
	exit 0
fi
case ",$fmt," in *,csv,*) ;; *) echo "Format must be specified with --format=csv" >&2; exit 2 ;; esac
unit() { if [ -n "$units" ]; then printf '%s %s' "$1" "$2"; else printf '%s' "$1"; fi; }
field() {
	case $2 in
	index) printf '%s' "$1" ;;
	name|gpu_name) printf '%s' "$name" ;;
	uuid|gpu_uuid) printf '%s' "$uuid" ;;
	count) printf '%s' "$count" ;;
	driver_version) printf '%s' "$driver" ;;
	pci.bus_id|gpu_bus_id) printf '00000000:%02X:00.0' $(($1+1)) ;;
	memory.total) unit "$mem" MiB ;;
	memory.free) unit "$mem" MiB ;;
	memory.used|memory.reserved) unit 0 MiB ;;
	utilization.gpu|utilization.memory) unit 0 % ;;
	temperature.gpu) printf '35' ;;
	power.draw) unit 20.00 W ;;
	*) return 1 ;;
	esac
}
hunit() {
	case $1 in
	memory.*) printf '%s [MiB]' "$1" ;;
	utilization.*) printf '%s [%%]' "$1" ;;
	power.draw) printf '%s [W]' "$1" ;;
	*) printf '%s' "$1" ;;
	esac
}
IFS=,
for f in $query; do
	gpu 0
	if ! field 0 "$f" >/dev/null; then
		echo "Field \"$f\" is not a valid field to query." >&2
		exit 2
	fi
done
if [ -n "$header" ]; then
	sep=
	for f in $query; do printf '%s' "$sep"; hunit "$f"; sep=', '; done
	echo
fi
i=0
while [ $i -lt $count ]; do
	gpu $i
	sep=
	for f in $query; do printf '%s' "$sep"; field $i "$f"; sep=', '; done
	echo
	i=$((i+1))
done
`
