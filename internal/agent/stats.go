package agent

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// sampler reads what a heartbeat reports about the machine: from cgroup
// v2 inside a container (what the container may use, not the host), from
// /proc otherwise. CPU use is a rate, so each sample is measured against
// the previous one.
type sampler struct {
	cgroup    string // the cgroup v2 mount holding cpu.stat, or ""
	proc      string // /proc
	diskPath  string // the filesystem whose use is reported
	nvidiaSMI string // its path, or "" when absent

	prevBusy  float64 // cgroup: usage µs; /proc: busy jiffies
	prevTotal float64 // cgroup: wall µs; /proc: all jiffies
	primed    bool
}

func newSampler(cgroup, proc, diskPath string) *sampler {
	s := &sampler{proc: proc, diskPath: diskPath}
	if _, err := os.Stat(filepath.Join(cgroup, "cpu.stat")); err == nil {
		s.cgroup = cgroup
	}
	if p, err := exec.LookPath("nvidia-smi"); err == nil {
		s.nvidiaSMI = p
	}
	s.cpu(time.Now()) // prime, so the first heartbeat has a rate
	return s
}

// fill sets the machine fields of hb.
func (s *sampler) fill(ctx context.Context, hb *wire.Heartbeat, now time.Time) {
	hb.CPUCores = s.cores()
	hb.CPUPercent = s.cpu(now)
	hb.RAMUsedBytes, hb.RAMTotalBytes = s.memory()
	hb.DiskUsedBytes, hb.DiskTotalBytes = s.disk()
	hb.UptimeS = s.uptime()
	if s.nvidiaSMI != "" {
		hb.GPUs = s.gpus(ctx)
	}
}

// cores is what the CPU share may reach: the cgroup's quota when one is
// set, else the CPUs this process may run on.
func (s *sampler) cores() float64 {
	if s.cgroup != "" {
		if b, err := os.ReadFile(filepath.Join(s.cgroup, "cpu.max")); err == nil {
			f := strings.Fields(string(b))
			if len(f) == 2 && f[0] != "max" {
				quota, err1 := strconv.ParseFloat(f[0], 64)
				period, err2 := strconv.ParseFloat(f[1], 64)
				if err1 == nil && err2 == nil && period > 0 {
					return quota / period
				}
			}
		}
	}
	return float64(runtime.NumCPU())
}

// cpu is the CPU use since the previous call, summed over cores: a
// 128-core machine at full load reports 12,800.
func (s *sampler) cpu(now time.Time) float64 {
	var busy, total float64
	var ok bool
	if s.cgroup != "" {
		busy, ok = s.cgroupUsage()
		total = float64(now.UnixMicro())
	} else {
		busy, total, ok = s.procStat()
	}
	if !ok {
		return 0
	}
	prevBusy, prevTotal, primed := s.prevBusy, s.prevTotal, s.primed
	s.prevBusy, s.prevTotal, s.primed = busy, total, true
	if !primed || total <= prevTotal || busy < prevBusy {
		return 0
	}
	frac := (busy - prevBusy) / (total - prevTotal)
	if s.cgroup != "" {
		return frac * 100 // µs of CPU per µs of wall time: already summed over cores
	}
	return frac * 100 * float64(s.procCPUs())
}

func (s *sampler) cgroupUsage() (float64, bool) {
	b, err := os.ReadFile(filepath.Join(s.cgroup, "cpu.stat"))
	if err != nil {
		return 0, false
	}
	v, ok := field(b, "usage_usec")
	return v, ok
}

// procStat is the machine's busy and total jiffies from /proc/stat.
func (s *sampler) procStat() (busy, total float64, ok bool) {
	b, err := os.ReadFile(filepath.Join(s.proc, "stat"))
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, false
	}
	// user nice system idle iowait irq softirq steal (guest is inside user)
	for i, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, 0, false
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total, true
}

// procCPUs counts the cpuN lines of /proc/stat: the machine's CPUs, which
// /proc/stat's first line sums over.
func (s *sampler) procCPUs() int {
	b, err := os.ReadFile(filepath.Join(s.proc, "stat"))
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if len(line) > 3 && bytes.HasPrefix(line, []byte("cpu")) && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	if n == 0 {
		return runtime.NumCPU()
	}
	return n
}

// memory is the working set (what cannot be dropped: cgroup current less
// inactive file cache, or MemTotal less MemAvailable) and the limit.
func (s *sampler) memory() (used, total int64) {
	if s.cgroup != "" {
		cur, err := readInt(filepath.Join(s.cgroup, "memory.current"))
		if err == nil {
			if b, err := os.ReadFile(filepath.Join(s.cgroup, "memory.stat")); err == nil {
				if inactive, ok := field(b, "inactive_file"); ok && int64(inactive) < cur {
					cur -= int64(inactive)
				}
			}
			limit, err := readInt(filepath.Join(s.cgroup, "memory.max")) // "max" fails: no limit
			if err != nil || limit <= 0 {
				_, limit = s.meminfo()
			}
			return cur, limit
		}
	}
	return s.meminfo()
}

func (s *sampler) meminfo() (used, total int64) {
	b, err := os.ReadFile(filepath.Join(s.proc, "meminfo"))
	if err != nil {
		return 0, 0
	}
	t, _ := field(b, "MemTotal:")
	a, ok := field(b, "MemAvailable:")
	if !ok {
		a, _ = field(b, "MemFree:")
	}
	return int64(t-a) * 1024, int64(t) * 1024
}

func (s *sampler) disk() (used, total int64) { return diskUsage(s.diskPath) }

// uptime is how long the container has run: the machine's uptime less
// the start of PID 1 (the container's init), or the machine's on a host.
func (s *sampler) uptime() float64 {
	b, err := os.ReadFile(filepath.Join(s.proc, "uptime"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	up, _ := strconv.ParseFloat(f[0], 64)
	if st, err := os.ReadFile(filepath.Join(s.proc, "1", "stat")); err == nil {
		if i := bytes.LastIndexByte(st, ')'); i >= 0 {
			// Fields after the command; starttime is field 22 overall,
			// the 20th after ')', in clock ticks (100 a second on Linux).
			rest := strings.Fields(string(st[i+1:]))
			if len(rest) >= 20 {
				if ticks, err := strconv.ParseFloat(rest[19], 64); err == nil && ticks/100 <= up {
					return up - ticks/100
				}
			}
		}
	}
	return up
}

// gpus asks nvidia-smi; a slow or broken driver costs at most a few
// seconds and reports nothing.
func (s *sampler) gpus(ctx context.Context) []wire.GPU {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.nvidiaSMI,
		"--query-gpu=index,utilization.gpu,memory.used,memory.total",
		"--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil
	}
	return parseNvidiaSMI(out)
}

func parseNvidiaSMI(out []byte) []wire.GPU {
	var gpus []wire.GPU
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) != 4 {
			continue
		}
		num := func(s string) float64 {
			v, _ := strconv.ParseFloat(strings.TrimSpace(s), 64) // "[N/A]" reads as 0
			return v
		}
		idx, err := strconv.Atoi(strings.TrimSpace(f[0]))
		if err != nil {
			continue
		}
		gpus = append(gpus, wire.GPU{Index: idx, UtilPercent: num(f[1]), MemUsedMB: num(f[2]), MemTotalMB: num(f[3])})
	}
	return gpus
}

// field finds "name value" in a key-value file (cpu.stat, memory.stat,
// meminfo) and returns the value.
func field(b []byte, name string) (float64, bool) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) >= 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
