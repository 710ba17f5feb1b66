package scalebench

import (
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The launch's summary says which nodes are ready; the job phase counts
// only those, since a node the launch replaced or found surplus may have
// run the job and reported too (300 ready, 321 jobs done at 300 nodes).
func TestLaunchSummaryAndJobCountReadyNodesOnly(t *testing.T) {
	t.Parallel()
	out := `{"event":"start","msg":"launching 3"}
{"event":"short_hardware","instance_id":9}
not JSON: a progress line
{"event":"summary","asked":3,"ready":3,"rented":5,"ready_ids":[1,2,3]}
`
	b := &bench{}
	ok, note, err := b.parseLaunch([]byte(out))
	if err != nil || ok != 3 || note != "5 rented, 1 short_hardware" || len(b.readyIDs) != 3 || !b.readyIDs[2] {
		t.Fatalf("parseLaunch: %d %q %v, ready %v", ok, note, err, b.readyIDs)
	}
	if _, _, err := b.parseLaunch([]byte(`{"event":"start"}`)); err == nil {
		t.Error("a launch without a summary line was taken for one")
	}
	var s snapshot
	zero, one := 0, 1
	for _, n := range []struct {
		id    int64
		iters float64
		state string
		exit  *int
	}{
		{1, 100, "exited", &zero},
		{2, 100, "exited", &zero},
		{3, 50, "running", nil},   // not done yet
		{9, 100, "exited", &zero}, // replaced: not the fleet's
		{4, 100, "exited", &one},
	} {
		s.Nodes = append(s.Nodes, stateNode{InstanceID: n.id, Metrics: map[string]float64{"iters": n.iters},
			Sessions: []stateSession{{Name: "work", State: n.state, ExitCode: n.exit}}})
	}
	b.readyIDs[4] = true
	if got := s.done(100, b.readyIDs); got != 2 {
		t.Errorf("done: %d nodes, want 2 (nodes 1 and 2)", got)
	}
}

func TestParseRows(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		parse parser
		out   string
		ok    int
		note  string
	}{
		{"exec", parseRows, `[{"exit_code":0},{"exit_code":1},{"exit_code":0,"error":"ssh: refused"},{"exit_code":0}]`, 2, ""},
		{"sync", parseRows, `[{"files_sent":3},{"error":"relay failed"}]`, 1, ""},
		{"collect", parseCollect, `[{"files":1},{"files":0},{"files":2,"error":"cut short"}]`, 1, "3 files"},
		{"destroy", parseDestroy, `{"action":"destroy","ids":[4,5,6]}`, 3, ""},
		{"destroy nothing", parseDestroy, "", 0, "nothing to destroy"},
		{"cost", parseCost, `{"instances":[{},{}],"total":1.5}`, 2, "2 instances billed, $1.50 in all"},
	} {
		ok, note, err := c.parse([]byte(c.out))
		if err != nil || ok != c.ok || note != c.note {
			t.Errorf("%s: %d %q %v, want %d %q", c.name, ok, note, err, c.ok, c.note)
		}
	}
	if _, _, err := parseRows([]byte("error: not JSON")); err == nil {
		t.Error("output that is not rows was read as rows")
	}
}

// The job runs under sh, and the README's session quoting holds.
func TestJobSessionRuns(t *testing.T) {
	t.Parallel()
	name, cmd, _ := strings.Cut(jobSession(500), ":")
	if name != "work" {
		t.Fatalf("session %q", name)
	}
	dir := t.TempDir()
	c := exec.Command("sh", "-c", cmd)
	c.Dir = dir
	out, err := c.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || lines[0] != `{"metric":"iters","value":500}` || !strings.HasPrefix(lines[1], `{"found":{"sum":`) {
		t.Errorf("the job printed %q", lines)
	}
	if b, err := os.ReadFile(dir + "/results/sum.txt"); err != nil || len(b) == 0 {
		t.Errorf("no results file: %v", err)
	}
}

// The agent's onstart starts it with nohup and exits, so init adopts it:
// the simulated machines' processes are found by the marker in their
// environment as well as by descent.
func TestHostTrackerFindsProcessesThatLeftTheTree(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	marker := "VASTFLEET_SIM_MACHINE=" + t.TempDir() + "/"
	leaveMarked(t, marker+"1/2")
	// Its parent has exited: the sleep is no descendant of this process.
	tr := newHostTracker(os.Getpid(), marker)
	var ts treeSample
	deadline := time.Now().Add(5 * time.Second)
	for {
		ts, _ = tr.sample()
		if ts.Procs >= 1 && ts.RSS > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ts.Procs < 1 || ts.RSS <= 0 {
		t.Fatalf("the adopted marked process was not found: %+v", ts)
	}
	other := newHostTracker(os.Getpid(), "VASTFLEET_SIM_MACHINE=/elsewhere/")
	if got, _ := other.sample(); got.Procs != 0 {
		t.Errorf("another market's marker found %d processes", got.Procs)
	}
}

// A market killed outright leaves its machines' processes to init: the
// bench's stop kills every process that carries its marker, so an
// interrupted run leaves nothing running (once, 931 agents were left).
func TestStopKillsTheMachinesTheMarketLeft(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	b := &bench{cfg: Config{Log: io.Discard}, dir: t.TempDir()}
	// A stand-in market that has already died, leaving a machine's
	// process behind; and one of another bench's, which must live.
	sim := exec.Command("true")
	if err := sim.Run(); err != nil {
		t.Fatal(err)
	}
	b.sim = sim
	b.hosts = newHostTracker(sim.Process.Pid, b.hostMarker())
	left := leaveMarked(t, b.hostMarker()+"vastfleet-sim-1/7/1")
	other := leaveMarked(t, "VASTFLEET_SIM_MACHINE="+t.TempDir()+"/vastfleet-sim-1/7/1")
	b.stop()
	deadline := time.Now().Add(10 * time.Second)
	for alive(left) {
		if time.Now().After(deadline) {
			t.Fatalf("the machine's process %d outlived the bench", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !alive(other) {
		t.Error("another market's machine process was killed")
	}
}

// alive: the process exists and is not a zombie (one that is not this
// process's child waits for init, which in a container may never reap it).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// leaveMarked starts a sleep with entry in its environment whose parent
// exits at once, as a machine's daemon that init adopted; it says its pid.
func leaveMarked(t *testing.T, entry string) int {
	t.Helper()
	c := exec.Command("sh", "-c", `sleep 60 >/dev/null 2>&1 & echo $!`)
	c.Env = append(os.Environ(), entry)
	out, err := c.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := os.FindProcess(pid)
	t.Cleanup(func() { p.Kill() })
	return pid
}
