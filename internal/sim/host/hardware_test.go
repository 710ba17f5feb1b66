package host

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testGPUs = []GPU{
	{Name: "NVIDIA GeForce RTX 4090", MemMiB: 24564, Driver: "550.54.15", UUID: "GPU-0a1b2c3d-0000-1111-2222-333344445555"},
	{Name: "NVIDIA GeForce RTX 4090", MemMiB: 24564, Driver: "550.54.15", UUID: "GPU-0a1b2c3d-0000-1111-2222-333344446666"},
}

// The simulated nvidia-smi answers the queries tools make in the real
// tool's formats: csv with and without header and units, and -L.
func TestNvidiaSMIFormats(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	smi := filepath.Join(dir, "nvidia-smi")
	if err := os.WriteFile(smi, []byte(NvidiaSMIScript(testGPUs)), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
		fail bool
	}{
		{args: []string{"--query-gpu=name,memory.total,utilization.gpu,driver_version", "--format=csv,noheader,nounits"},
			want: "NVIDIA GeForce RTX 4090, 24564, 0, 550.54.15\nNVIDIA GeForce RTX 4090, 24564, 0, 550.54.15\n"},
		{args: []string{"--query-gpu=index,name,memory.total,utilization.gpu", "--format=csv"},
			want: "index, name, memory.total [MiB], utilization.gpu [%]\n0, NVIDIA GeForce RTX 4090, 24564 MiB, 0 %\n1, NVIDIA GeForce RTX 4090, 24564 MiB, 0 %\n"},
		{args: []string{"--query-gpu=index,utilization.gpu,memory.used,memory.total", "--format=csv,noheader,nounits"},
			want: "0, 0, 0, 24564\n1, 0, 0, 24564\n"},
		{args: []string{"-L"},
			want: "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-0a1b2c3d-0000-1111-2222-333344445555)\nGPU 1: NVIDIA GeForce RTX 4090 (UUID: GPU-0a1b2c3d-0000-1111-2222-333344446666)\n"},
		{args: []string{"--query-gpu=bogus", "--format=csv"}, want: "Field \"bogus\" is not a valid field to query.\n", fail: true},
		{args: []string{"--query-gpu=name"}, want: "Format must be specified with --format=csv\n", fail: true},
	} {
		out, err := exec.Command(smi, tc.args...).CombinedOutput()
		if (err != nil) != tc.fail || string(out) != tc.want {
			t.Errorf("nvidia-smi %s: err %v, got\n%s\nwant\n%s", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
}

// A machine with GPUs has nvidia-smi first on its PATH, for the onstart
// (and so the agent) as for SSH sessions; one without has none of ours.
func TestMachinePathHasNvidiaSMI(t *testing.T) {
	t.Parallel()
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Boot(Spec{ID: 1, Onstart: "nvidia-smi -L > gpus.txt 2>&1",
		Hardware: Hardware{Cores: 8, GPUs: testGPUs[:1]}}); err != nil {
		t.Fatal(err)
	}
	if got := waitFile(t, filepath.Join(m.Dir(1), "gpus.txt")); !strings.HasPrefix(got, "GPU 0: NVIDIA GeForce RTX 4090 (UUID: ") {
		t.Errorf("onstart's nvidia-smi -L: %q", got)
	}
	if _, err := m.Boot(Spec{ID: 2, Onstart: "command -v nvidia-smi > where.txt; echo done >> where.txt",
		Hardware: Hardware{Cores: 8}}); err != nil {
		t.Fatal(err)
	}
	if got := waitFile(t, filepath.Join(m.Dir(2), "where.txt")); strings.Contains(got, m.root) {
		t.Errorf("a machine without GPUs found a simulated nvidia-smi: %q", got)
	}
}

func TestDuty(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		hw   Hardware
		want float64
	}{
		{Hardware{Cores: 16, TrueCores: 16}, 1}, {Hardware{Cores: 16}, 1}, {Hardware{Cores: 16, TrueCores: 4}, 0.25},
		{Hardware{Cores: 16, TrueCores: 32}, 1}, {Hardware{}, 1},
	} {
		if got := tc.hw.Duty(); got != tc.want {
			t.Errorf("%+v: duty %v, want %v", tc.hw, got, tc.want)
		}
	}
}

// A machine's processes find their own cgroup directory, as a container
// finds /sys/fs/cgroup: its quota is its advertised cores and its
// cpu.stat counts its own processes' CPU time only, so a machine that
// spins shows its use and an idle one beside it shows none.
func TestMachineCgroupCountsItsOwnCPU(t *testing.T) {
	t.Parallel()
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for id, onstart := range map[int64]string{
		1: `echo "$VASTFLEET_CGROUP" > cg.txt; (while :; do :; done) & sleep 600`,
		2: `echo "$VASTFLEET_CGROUP" > cg.txt; sleep 600`,
	} {
		if _, err := m.Boot(Spec{ID: id, Onstart: onstart, Hardware: Hardware{Cores: 4}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int64{1, 2} {
		if got := strings.TrimSpace(waitFile(t, filepath.Join(m.Dir(id), "cg.txt"))); got != m.cgroupDir(id) {
			t.Fatalf("machine %d: its processes see VASTFLEET_CGROUP=%q, want %q", id, got, m.cgroupDir(id))
		}
		if b, _ := os.ReadFile(filepath.Join(m.cgroupDir(id), "cpu.max")); string(b) != "400000 100000\n" {
			t.Errorf("machine %d: cpu.max %q", id, b)
		}
	}
	usage := func(id int64) float64 {
		b, _ := os.ReadFile(filepath.Join(m.cgroupDir(id), "cpu.stat"))
		var us float64
		fmt.Sscanf(string(b), "usage_usec %g", &us)
		return us / 1e6
	}
	deadline := time.Now().Add(time.Minute)
	for usage(1) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the spinning machine's cpu.stat reached %.2f CPU-s in a minute", usage(1))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if u := usage(2); u > 0.2 {
		t.Errorf("the idle machine's cpu.stat counts %.2f CPU-s (the spinning one %.2f): another machine's use", u, usage(1))
	}
	// A new boot is a new container: its count starts again.
	if _, err := m.Boot(Spec{ID: 1, Onstart: "sleep 600", Hardware: Hardware{Cores: 4}}); err != nil {
		t.Fatal(err)
	}
	if u := usage(1); u > 0.2 {
		t.Errorf("machine 1 booted again: cpu.stat starts at %.2f CPU-s", u)
	}
}

// Under the capacity model each machine's workload gets its true cores
// over the scale, whatever else runs: a 20-core machine twice a
// 10-core one's CPU, and one advertising 20 but truly having 5 a
// quarter; the onstart's own group (where the agent runs) stays out of
// the workload's cgroup.
func TestCapacityModelGivesTrueCores(t *testing.T) {
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, _, err := m.capacityCgroups(); err != nil {
		t.Skipf("no capacity model here: %v", err)
	}
	const scale = 100
	hws := map[int64]Hardware{
		1: {Cores: 10, Scale: scale},
		2: {Cores: 20, Scale: scale},
		3: {Cores: 20, TrueCores: 5, Scale: scale},
	}
	for id, hw := range hws {
		if _, err := m.Boot(Spec{ID: id, Hardware: hw,
			// As the agent starts a session: a group of its own whose
			// shell forks the work at once.
			Onstart: `setsid sh -c 'sh -c "while :; do :; done"; true' & echo $! > work.pid; echo $$ > onstart.pid; sleep 600`}); err != nil {
			t.Fatal(err)
		}
	}
	pids := map[int64]int{}
	for id := range hws {
		mc := m.running[id]
		pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(m.Dir(id), "work.pid"))))
		onstart, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(m.Dir(id), "onstart.pid"))))
		deadline := time.Now().Add(30 * time.Second)
		for !mc.cap.workPIDs()[pid] {
			if time.Now().After(deadline) {
				t.Fatalf("machine %d: its workload (pid %d) never went into %s", id, pid, mc.cap.work)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if mc.cap.workPIDs()[onstart] || !slices.Contains(cgroupPIDs(mc.cap.dir), onstart) {
			t.Errorf("machine %d: the onstart (pid %d) is not in the machine's own cgroup: work %v, machine %v",
				id, onstart, mc.cap.workPIDs(), cgroupPIDs(mc.cap.dir))
		}
		pids[id] = pid
	}
	ticks := func() map[int64]float64 {
		out := map[int64]float64{}
		for id := range pids {
			for pid := range m.running[id].cap.workPIDs() {
				_, t, _ := procTimes(pid)
				out[id] += t / userHZ
			}
		}
		return out
	}
	t0, w0 := ticks(), time.Now()
	time.Sleep(4 * time.Second)
	t1, wall := ticks(), time.Since(w0).Seconds()
	got := map[int64]float64{}
	for id, hw := range hws {
		got[id] = (t1[id] - t0[id]) / wall
		if b := hw.CPUBudget(); got[id] > 1.25*b+0.02 {
			t.Errorf("machine %d: its workload had %.3f of a core, over its budget %.3f", id, got[id], b)
		}
	}
	t.Logf("cores had per machine: %v (budgets 0.1, 0.2, 0.05)", got)
	if r := got[2] / got[1]; r < 1.5 || r > 2.7 {
		t.Errorf("20 true cores had %.2f× what 10 had (%v), want about 2", r, got)
	}
	if r := got[1] / got[3]; r < 1.4 || r > 3 {
		t.Errorf("10 true cores had %.2f× what 5 had (%v), want about 2", r, got)
	}
}

func TestCFSQuota(t *testing.T) {
	for _, tc := range []struct {
		budget        float64
		period, quota time.Duration
	}{
		{0.5, 100 * time.Millisecond, 50 * time.Millisecond},
		{0.005, 200 * time.Millisecond, time.Millisecond},
		{0.0001, time.Second, time.Millisecond},
	} {
		if p, q := cfsQuota(tc.budget); p != tc.period || q != tc.quota {
			t.Errorf("budget %v: period %v quota %v, want %v %v", tc.budget, p, q, tc.period, tc.quota)
		}
	}
}
