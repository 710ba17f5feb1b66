// Package scalebench is `vastfleet bench scale`: a fleet of N on a served
// simulated market with machines behind its instances, driven through the
// vastfleet binary exactly as a user drives it, each command its own
// process. It serves the market (`sim serve`) and a coordinator (`coord`),
// then runs the phases a job goes through, one command each:
//
//	launch   launch --coord auto --count N: the agent on every node, a short
//	         CPU job under it that reports a metric and a finding
//	job      (no command) until the coordinator holds every node's metric
//	         and finding
//	exec     exec --fleet F -- true
//	ssh      the system ssh client run 32 at a time (pdsh's fan-out) on
//	         the same nodes, from `export --format ssh-config`: the same
//	         `true` side by side with exec
//	sync     sync TREE --fleet F
//	collect  collect --fleet F
//	destroy  destroy --all --fleet F
//	report   cost --fleet F
//
// For every phase it measures the command (wall time, CPU seconds from its
// rusage, peak resident memory and open files, sampled from /proc), the
// coordinator and the simulator (CPU, peak memory and open files over the
// phase), and the simulated machines' processes together (CPU, memory,
// how many). Open files and the long-lived processes' figures need
// Linux's /proc; elsewhere they are not known.
package scalebench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vastfleet/vastfleet/internal/procgroup"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// FleetName is the fleet every phase acts on.
const FleetName = "scale"

// simBalance is the served market's account credit, dollars.
const simBalance = "1e9"

// Config is one run.
type Config struct {
	// Bin is the vastfleet binary every process runs.
	Bin string
	// Nodes is the fleet's size.
	Nodes int
	// Seed is the simulated market's; Faults its fault profile (none,
	// realistic, harsh); TimeScale its market seconds per wall second.
	Seed      int64
	Faults    string
	TimeScale float64
	// Deadline is the launch's, in market time.
	Deadline time.Duration
	// Heartbeat is the agents' heartbeat interval in wall time (told to
	// them as Heartbeat × TimeScale of market time, so that a fast market
	// does not multiply the coordinator's load).
	Heartbeat time.Duration
	// ProbeTimeout bounds each agent's boot probe (wall time). The
	// machines share this computer's CPUs, a thousand of them on a few
	// cores: a probe held to the agent's 60 s default fails for want of
	// CPU, which no real host of a real fleet would.
	ProbeTimeout time.Duration
	// Work is how many loop iterations each node's CPU job runs.
	Work int
	// SyncBytes in SyncFiles files make the tree synced to every node.
	SyncBytes int64
	SyncFiles int
	// Links paces each machine's SSH traffic at its offer's bandwidth
	// (sim serve --links).
	Links bool
	// PhaseTimeout bounds each phase in wall time: its command is then
	// interrupted (SIGINT), as a user's Ctrl+C, and the run goes on to
	// destroy.
	PhaseTimeout time.Duration
	// MemFloor stops the phase under way (and every phase up to destroy)
	// when this computer's available memory falls below it (Linux; 0:
	// never).
	MemFloor int64
	// Query is the launch's query (empty: launch's default).
	Query []string
	// Dir keeps the run's data dir, logs and results when set; otherwise
	// they go in a temporary directory removed at the end.
	Dir string
	// Log takes progress lines; OnPhase each phase as it ends.
	Log     io.Writer
	OnPhase func(Phase)
}

// Defaults.
const (
	DefaultNodes        = 300
	DefaultTimeScale    = 60
	DefaultDeadline     = 6 * time.Hour
	DefaultHeartbeat    = 10 * time.Second
	DefaultProbeTimeout = 10 * time.Minute
	DefaultWork         = 10000
	DefaultSyncBytes    = 1_000_000
	DefaultSyncFiles    = 16
	DefaultPhaseTimeout = 30 * time.Minute
	DefaultMemFloor     = 2_000_000_000
)

// Process names in Usage.
const (
	ProcVastfleet = "vastfleet" // the phase's command
	ProcCoord     = "coord"
	ProcSim       = "sim"
	ProcHosts     = "hosts" // the simulated machines' processes, together
	ProcSSH       = "ssh"   // the ssh phase's system ssh clients, together
)

// Usage is one process's share of a phase; a nil figure is not known here.
type Usage struct {
	Process   string   `json:"process"`
	CPUS      *float64 `json:"cpu_s"`
	PeakRSSMB *float64 `json:"peak_rss_mb"`
	PeakFDs   *int     `json:"peak_fds"`
	// Procs is, for hosts, the most processes seen at once.
	Procs *int `json:"procs,omitempty"`
}

// Phase is what one phase did and cost.
type Phase struct {
	Event   string  `json:"event"` // "phase"
	Phase   string  `json:"phase"`
	Command string  `json:"command,omitempty"` // the vastfleet command it ran, global flags left out
	WallS   float64 `json:"wall_s"`
	OK      int     `json:"ok"`    // nodes it reached
	Nodes   int     `json:"nodes"` // nodes it was to reach
	// MemAvailableMinMB is the least memory this computer had available
	// during the phase (Linux).
	MemAvailableMinMB *float64 `json:"mem_available_min_mb,omitempty"`
	Note              string   `json:"note,omitempty"`
	Error             string   `json:"error,omitempty"`
	Skipped           bool     `json:"skipped,omitempty"`
	Usage             []Usage  `json:"usage"`
}

// Summary is the run in one object: the nodes each phase reached and the
// peaks over all phases (0 where not known). MB are 10^6 bytes.
type Summary struct {
	Event    string `json:"event"` // "summary"
	Nodes    int    `json:"nodes"`
	Ready    int    `json:"ready"`
	JobOK    int    `json:"job_ok"`
	Findings int64  `json:"findings"`
	ExecOK   int    `json:"exec_ok"`
	// SSHOK is the nodes the system ssh reached, 32 at a time; ExecSpeedup
	// is its wall time over exec's (0: not run).
	SSHOK       int     `json:"ssh_ok"`
	ExecSpeedup float64 `json:"exec_speedup,omitempty"`
	// ExecCPUS and SSHCPUS are what each side cost this computer's CPUs:
	// the client (exec, or every ssh) and the simulator with its machines,
	// where the sessions' shells run. On a real fleet each node's share
	// is its own; here both sides pay it on the same cores, so the wall
	// speedup of a CPU-bound run nears SSHCPUS/ExecCPUS.
	ExecCPUS float64 `json:"exec_cpu_s,omitempty"`
	SSHCPUS  float64 `json:"ssh_cpu_s,omitempty"`
	SyncOK   int     `json:"sync_ok"`
	// SyncLastS is when the last node held the synced tree, after the
	// sync began; SyncLinkS the least that could take (the slowest node's
	// archive over its listed downlink; 0: links not listed).
	SyncLastS float64 `json:"sync_last_s,omitempty"`
	SyncLinkS float64 `json:"sync_link_s,omitempty"`
	CollectOK int     `json:"collect_ok"`
	Destroyed int     `json:"destroyed"`
	WallS     float64 `json:"wall_s"`
	// SetupS is the market's and the coordinator's start (the agent
	// built or found), before the first phase.
	SetupS float64 `json:"setup_s"`
	// The vastfleet commands' largest figures, and each long-lived
	// process's.
	PeakRSSMB      float64 `json:"peak_rss_mb"`
	PeakFDs        int     `json:"peak_fds"`
	CPUS           float64 `json:"cpu_s"`
	CoordPeakRSSMB float64 `json:"coord_peak_rss_mb"`
	CoordPeakFDs   int     `json:"coord_peak_fds"`
	CoordCPUS      float64 `json:"coord_cpu_s"`
	SimPeakRSSMB   float64 `json:"sim_peak_rss_mb"`
	SimPeakFDs     int     `json:"sim_peak_fds"`
	SimCPUS        float64 `json:"sim_cpu_s"`
	HostsPeakRSSMB float64 `json:"hosts_peak_rss_mb"`
	HostsPeakProcs int     `json:"hosts_peak_procs"`
	HostsCPUS      float64 `json:"hosts_cpu_s"`
	// SimRSSAfterMB is the simulator's memory a few seconds after the
	// fleet was destroyed, and HostsLeft its machines' processes then.
	SimRSSAfterMB float64 `json:"sim_rss_after_mb"`
	HostsLeft     int     `json:"hosts_left"`
	// FDLimit is the hard limit on open files each process may raise
	// itself to (Go programs do at start).
	FDLimit uint64 `json:"fd_limit,omitempty"`
	// Failed names the first phase that did not reach every node, and why.
	Failed string `json:"failed,omitempty"`
}

// Report is a whole run.
type Report struct {
	Phases  []Phase
	Summary Summary
}

// Complete reports whether every phase reached every node.
func (s Summary) Complete() bool {
	n := s.Nodes
	return s.Ready == n && s.JobOK == n && s.ExecOK == n && s.SyncOK == n && s.CollectOK == n && s.Destroyed >= n && s.Failed == ""
}

func (c *Config) defaults() {
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	if c.Faults == "" {
		c.Faults = "none"
	}
	if c.TimeScale == 0 {
		c.TimeScale = DefaultTimeScale
	}
	if c.Deadline == 0 {
		c.Deadline = DefaultDeadline
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.Work == 0 {
		c.Work = DefaultWork
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.SyncBytes == 0 {
		c.SyncBytes = DefaultSyncBytes
	}
	if c.SyncFiles == 0 {
		c.SyncFiles = DefaultSyncFiles
	}
	if c.PhaseTimeout == 0 {
		c.PhaseTimeout = DefaultPhaseTimeout
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// bench is a run under way.
type bench struct {
	cfg               Config
	dir, data, logs   string
	simURL, coordAddr string
	sim, coord        *exec.Cmd
	hosts             *hostTracker
	global            []string
	env               []string
	memLow            bool // the memory floor was hit: only destroy and report run
	finishing         bool // destroy and report: they run whatever the memory
	ready             int
	readyIDs          map[int64]bool // the nodes launch reported ready
	findings          int64
}

// Run runs the benchmark. The report holds every phase that ran, even
// when an error ends the run early; the fleet is destroyed whatever
// happened (and the market, served from memory, goes with its process).
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg.defaults()
	var rep Report
	if cfg.Bin == "" {
		return rep, errors.New("scalebench: no vastfleet binary")
	}
	if cfg.Nodes < 1 {
		return rep, fmt.Errorf("scalebench: %d nodes", cfg.Nodes)
	}
	b := &bench{cfg: cfg}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "vastfleet-bench-scale-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return rep, err
	}
	b.dir, b.data, b.logs = dir, filepath.Join(dir, "data"), filepath.Join(dir, "logs")
	for _, d := range []string{b.data, b.logs, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return rep, err
		}
	}
	b.env = childEnv(filepath.Join(dir, "tmp"))

	start := time.Now()
	defer b.stop()
	if err := b.startSim(ctx); err != nil {
		return rep, err
	}
	if err := b.startCoord(ctx); err != nil {
		return rep, err
	}
	sum := Summary{Event: "summary", Nodes: cfg.Nodes, SetupS: time.Since(start).Seconds()}
	_, sum.FDLimit = fdLimit()
	fmt.Fprintf(cfg.Log, "market at %s and coordinator at %s ready in %.1fs; logs in %s\n", b.simURL, b.coordAddr, sum.SetupS, b.logs)

	tree := filepath.Join(dir, "tree")
	if err := writeTree(tree, cfg.SyncBytes, cfg.SyncFiles, cfg.Seed); err != nil {
		return rep, err
	}
	add := func(p Phase) {
		p.Event = "phase"
		rep.Phases = append(rep.Phases, p)
		// A skipped phase's cause is an earlier phase's shortfall, or a
		// tool this machine lacks (its note says which).
		if sum.Failed == "" && !p.Skipped {
			switch {
			case p.Error != "":
				sum.Failed = p.Phase + ": " + p.Error
			case p.OK < p.Nodes:
				sum.Failed = fmt.Sprintf("%s: %d of %d nodes", p.Phase, p.OK, p.Nodes)
				if p.Note != "" {
					sum.Failed += " (" + p.Note + ")"
				}
			}
		}
		if cfg.OnPhase != nil {
			cfg.OnPhase(p)
		}
	}
	fleetFlag := []string{"--fleet", FleetName}
	n := cfg.Nodes

	launch := append([]string{"launch", "--coord", "auto", "--count", strconv.Itoa(n), "--fleet", FleetName,
		"--deadline", cfg.Deadline.String(), "--orphan-after", b.orphanAfter().String(),
		"--session", jobSession(cfg.Work), "--env", wire.EnvProbe + "=" + cfg.ProbeTimeout.String(), "--json"}, cfg.Query...)
	p := b.command(ctx, "launch", n, launch, b.parseLaunch)
	b.ready = p.OK
	sum.Ready = p.OK
	add(p)

	p = b.job(ctx, b.ready)
	sum.JobOK, sum.Findings = p.OK, b.findings
	add(p)

	p = b.command(ctx, "exec", b.ready, append(append([]string{"exec"}, fleetFlag...), "--json", "--", "true"), parseRows)
	sum.ExecOK = p.OK
	execWall := p.WallS
	sum.ExecCPUS = round3(p.cpu(ProcVastfleet, ProcSim, ProcHosts))
	add(p)

	p = b.sshFanout(ctx, b.ready)
	sum.SSHOK = p.OK
	if execWall > 0 && p.WallS > 0 && !p.Skipped {
		sum.ExecSpeedup = round3(p.WallS / execWall)
		sum.SSHCPUS = round3(p.cpu(ProcSSH, ProcSim, ProcHosts))
	}
	add(p)

	p = b.command(ctx, "sync", b.ready, append(append([]string{"sync", tree}, fleetFlag...), "--dest", "project", "--json"),
		func(out []byte) (int, string, error) {
			ok, last, link, err := parseSync(out)
			sum.SyncLastS, sum.SyncLinkS = last, link
			note := ""
			if last > 0 {
				note = fmt.Sprintf("last node %.1fs", last)
				if link > 0 {
					note += fmt.Sprintf(", %.1fx its link's time", last/link)
				}
			}
			return ok, note, err
		})
	sum.SyncOK = p.OK
	add(p)

	p = b.command(ctx, "collect", b.ready, append(append([]string{"collect"}, fleetFlag...),
		"--remote", "results", "--to", filepath.Join(dir, "results"), "--json"), parseCollect)
	sum.CollectOK = p.OK
	add(p)

	// Destroy and report run whatever came before: nothing is left renting.
	b.finishing = true
	destroy := []string{"destroy", "--all", "--fleet", FleetName, "--yes", "--json"}
	if sum.CollectOK < b.ready {
		destroy = append(destroy, "--force") // results not collected must not keep the fleet alive
	}
	p = b.command(context.WithoutCancel(ctx), "destroy", b.ready, destroy, parseDestroy)
	sum.Destroyed = p.OK
	add(p)
	p = b.command(context.WithoutCancel(ctx), "report", b.ready, []string{"cost", "--fleet", FleetName, "--json"}, parseCost)
	// The report lists every instance rented, replacements included: it
	// reached the fleet when it lists at least the nodes that were ready.
	p.OK = min(p.OK, p.Nodes)
	add(p)

	for _, p := range rep.Phases {
		for _, u := range p.Usage {
			rss, fds, cpu := val(u.PeakRSSMB), 0, val(u.CPUS)
			if u.PeakFDs != nil {
				fds = *u.PeakFDs
			}
			switch u.Process {
			case ProcVastfleet:
				sum.PeakRSSMB, sum.PeakFDs = max(sum.PeakRSSMB, rss), max(sum.PeakFDs, fds)
				sum.CPUS += cpu
			case ProcCoord:
				sum.CoordPeakRSSMB, sum.CoordPeakFDs = max(sum.CoordPeakRSSMB, rss), max(sum.CoordPeakFDs, fds)
				sum.CoordCPUS += cpu
			case ProcSim:
				sum.SimPeakRSSMB, sum.SimPeakFDs = max(sum.SimPeakRSSMB, rss), max(sum.SimPeakFDs, fds)
				sum.SimCPUS += cpu
			case ProcHosts:
				sum.HostsPeakRSSMB = max(sum.HostsPeakRSSMB, rss)
				if u.Procs != nil {
					sum.HostsPeakProcs = max(sum.HostsPeakProcs, *u.Procs)
				}
				sum.HostsCPUS += cpu
			}
		}
	}
	// What the simulator gives back once the fleet is gone: a few seconds
	// for its runtime to return freed memory.
	sleep(ctx, 5*time.Second)
	if s, ok := readProc(b.sim.Process.Pid); ok {
		sum.SimRSSAfterMB = mb(s.RSS)
	}
	if t, ok := b.hosts.sample(); ok {
		sum.HostsLeft = t.Procs
	}
	sum.WallS = round3(time.Since(start).Seconds())
	sum.SetupS = round3(sum.SetupS)
	sum.CPUS, sum.CoordCPUS, sum.SimCPUS, sum.HostsCPUS = round3(sum.CPUS), round3(sum.CoordCPUS), round3(sum.SimCPUS), round3(sum.HostsCPUS)
	rep.Summary = sum
	return rep, nil
}

// orphanAfter is the agents' dead-man switch in market time: an hour of
// wall time, longer than any phase waits on a loaded computer.
func (b *bench) orphanAfter() time.Duration {
	return time.Duration(float64(time.Hour) * b.cfg.TimeScale).Round(time.Minute)
}

// jobSession is each node's CPU job: work iterations of shell arithmetic,
// a results file for collect, a metric and a finding for the coordinator.
func jobSession(work int) string {
	return fmt.Sprintf(`work:n=0; s=0; while [ $n -lt %d ]; do s=$(( (s*31+n) %% 1000003 )); n=$((n+1)); done; `+
		`mkdir -p results && echo $s > results/sum.txt; `+
		`echo "{\"metric\":\"iters\",\"value\":$n}"; echo "{\"found\":{\"sum\":$s}}"`, work)
}

// childEnv is the environment of every process the bench starts: the
// user's, less what would point them at another market, data dir or
// server, with temporary files (the simulated machines') under tmp.
func childEnv(tmp string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "VAST_API_KEY", "VAST_URL", "VASTFLEET_HOME", "VASTFLEET_TOKEN", "TMPDIR":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "TMPDIR="+tmp)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startSim serves the market with machines behind its instances.
func (b *bench) startSim(ctx context.Context) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	b.simURL = "http://" + addr
	b.global = []string{"--server", "local", "--market", "sim", "--api-url", b.simURL, "--data-dir", b.data}
	b.sim, err = b.background("sim", "--server", "local", "sim", "serve", "--addr", addr, "--seed", strconv.FormatInt(b.cfg.Seed, 10),
		"--faults", b.cfg.Faults, "--time-scale", strconv.FormatFloat(b.cfg.TimeScale, 'g', -1, 64), "--links="+strconv.FormatBool(b.cfg.Links),
		// Credit without end: at 60x a fleet of 1,000 spends the default
		// $1,000 in under two wall minutes, and the benchmark measures
		// scale, not the account.
		"--balance", simBalance)
	if err != nil {
		return err
	}
	b.hosts = newHostTracker(b.sim.Process.Pid, b.hostMarker())
	return b.waitFor(ctx, "the simulated market", time.Minute, func() bool {
		resp, err := http.Get(b.simURL + "/sim/clock")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// hostMarker begins the environment entry of every simulated machine's
// process: sim/host marks each with its directory, which sim serve makes
// under TMPDIR.
func (b *bench) hostMarker() string {
	return "VASTFLEET_SIM_MACHINE=" + filepath.Join(b.dir, "tmp") + string(filepath.Separator)
}

// startCoord starts the coordinator for this data dir, which finds or
// builds the agent it serves before it says it runs.
func (b *bench) startCoord(ctx context.Context) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	b.coordAddr = addr
	// The interval is market time: Heartbeat of wall time at this scale,
	// within the coordinator's bounds.
	hb := time.Duration(float64(b.cfg.Heartbeat) * b.cfg.TimeScale).Round(time.Second)
	hb = min(max(hb, time.Second), time.Hour)
	args := append(append([]string{}, b.global...), "coord", "--addr", addr, "--fleet", FleetName,
		"--heartbeat", hb.String(), "--orphan-after", b.orphanAfter().String())
	b.coord, err = b.background("coord", args...)
	if err != nil {
		return err
	}
	log := filepath.Join(b.logs, "coord.log")
	return b.waitFor(ctx, "the coordinator", 5*time.Minute, func() bool {
		out, _ := os.ReadFile(log)
		return bytes.Contains(out, []byte("Ctrl+C stops it"))
	})
}

// background starts a long-lived process, its output to logs/NAME.log.
func (b *bench) background(name string, args ...string) (*exec.Cmd, error) {
	out, err := os.Create(filepath.Join(b.logs, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(b.cfg.Bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Env, cmd.Dir = out, out, b.env, b.dir
	// A group of its own, so a Ctrl+C at the terminal reaches the bench
	// (which still destroys the fleet through them) and not them; told to
	// stop (SIGTERM) should the bench be killed outright.
	procgroup.Own(cmd)
	procgroup.EndWithParent(cmd)
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// The file stays open in the child; this process's copy can go.
	out.Close()
	return cmd, nil
}

// waitFor polls ok until it holds, the process it waits on ends, or d.
func (b *bench) waitFor(ctx context.Context, what string, d time.Duration, ok func() bool) error {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not start within %s (logs in %s)", what, d, b.logs)
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

// stop ends the coordinator, then the market (which stops its machines'
// processes): SIGTERM, and SIGKILL after half a minute. Then whatever
// machine process is left (its market killed, or too slow to stop them)
// is killed: an interrupted bench once left 931 agents running.
func (b *bench) stop() {
	defer func() {
		if b.hosts == nil {
			return
		}
		if killed := procgroup.KillMarked(b.hostMarker()); killed > 0 {
			fmt.Fprintf(b.cfg.Log, "killed %d simulated machines' processes the market left running\n", killed)
		}
	}()
	for _, c := range []*exec.Cmd{b.coord, b.sim} {
		if c == nil || c.Process == nil {
			continue
		}
		c.Process.Signal(terminate)
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			c.Process.Kill()
			<-done
		}
	}
}

// parser reads a command's stdout: how many nodes it reached, and a note.
type parser func(stdout []byte) (ok int, note string, err error)

// command runs one phase's vastfleet command and measures it beside the
// long-lived processes.
func (b *bench) command(ctx context.Context, name string, nodes int, args []string, parse parser) Phase {
	p := Phase{Phase: name, Command: "vastfleet " + quoteArgs(args), Nodes: nodes}
	if nodes == 0 && !b.finishing && name != "launch" {
		p.Skipped, p.Note = true, "no ready node"
		return p
	}
	if b.memLow && !b.finishing {
		p.Skipped, p.Note = true, "stopped at the memory floor"
		return p
	}
	fmt.Fprintf(b.cfg.Log, "%s: %d nodes...\n", name, nodes)
	ctx, cancel := context.WithTimeout(ctx, b.cfg.PhaseTimeout)
	defer cancel()
	stopAtFloor := cancel
	if b.finishing {
		stopAtFloor = func() {} // what frees the memory is not stopped for it
	}
	w := b.watch(stopAtFloor)
	logf, err := os.Create(filepath.Join(b.logs, name+".log"))
	if err != nil {
		p.Error = err.Error()
		return p
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, b.cfg.Bin, append(append([]string{}, b.global...), args...)...)
	// A phase past its time is interrupted as Ctrl+C would, so the
	// command cleans up; killed a minute later if it does not end.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Env, cmd.Dir = &stdout, logf, b.env, b.dir
	// Only the bench interrupts it: a terminal's Ctrl+C sent to it as
	// well would be its second, which ends a command at once, mid-cleanup.
	procgroup.Own(cmd)
	procgroup.EndWithParent(cmd)
	defer func() { os.WriteFile(filepath.Join(b.logs, name+".out"), stdout.Bytes(), 0o600) }()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		w.end(&p, nil)
		p.Error = err.Error()
		return p
	}
	w.setCmd(cmd.Process.Pid)
	runErr := cmd.Wait()
	p.WallS = round3(time.Since(start).Seconds())
	w.end(&p, cmd.ProcessState)
	p.OK, p.Note, err = parse(stdout.Bytes())
	if err != nil {
		p.Error = err.Error()
	}
	var ee *exec.ExitError
	switch {
	case runErr == nil:
	case w.memHitNow() && !b.finishing:
		p.Error = fmt.Sprintf("interrupted: available memory fell to %.0f MB, under the floor of %.0f MB", val(p.MemAvailableMinMB), mb(b.cfg.MemFloor))
		b.memLow = true
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		p.Error = fmt.Sprintf("interrupted after %s (the phase timeout)", b.cfg.PhaseTimeout)
	case errors.As(runErr, &ee) && ee.ExitCode() == 3:
		// Partial: the rows say which nodes failed.
	default:
		p.Error = fmt.Sprintf("%v: %s", runErr, lastLine(filepath.Join(b.logs, name+".log")))
	}
	return p
}

// sshFanout runs `true` on every node with the system ssh client, 32 at a
// time as pdsh does, through the ssh-config the user would export: the
// yardstick for exec, on the same nodes in the same run.
func (b *bench) sshFanout(ctx context.Context, nodes int) Phase {
	const fanout = 32
	p := Phase{Phase: "ssh", Nodes: nodes}
	sshBin, err := exec.LookPath("ssh")
	switch {
	case err != nil:
		p.Skipped, p.Note = true, "no ssh client on this machine"
		return p
	case nodes == 0 || b.memLow:
		p.Skipped, p.Note = true, "no ready node"
		return p
	}
	cfg := filepath.Join(b.dir, "ssh_config")
	export := exec.CommandContext(ctx, b.cfg.Bin, append(append([]string{}, b.global...), "export", "--format", "ssh-config", "--fleet", FleetName, "--out", cfg)...)
	export.Env, export.Dir = b.env, b.dir
	if out, err := export.CombinedOutput(); err != nil {
		p.Error = fmt.Sprintf("export --format ssh-config: %v: %s", err, bytes.TrimSpace(out))
		return p
	}
	hosts, err := sshConfigHosts(cfg)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	p.Command = fmt.Sprintf("ssh -F %s HOST true, %d at a time", cfg, fanout)
	fmt.Fprintf(b.cfg.Log, "ssh: %d nodes, %d at a time...\n", len(hosts), fanout)
	ctx, cancel := context.WithTimeout(ctx, b.cfg.PhaseTimeout)
	defer cancel()
	w := b.watch(cancel)
	start := time.Now()
	var ok atomic.Int64
	var cpuMu sync.Mutex
	var clientCPU time.Duration
	sem := make(chan struct{}, fanout)
	var wg sync.WaitGroup
	for _, h := range hosts {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c := exec.CommandContext(ctx, sshBin, "-F", cfg, "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", h, "true")
			c.Env = b.env
			if c.Run() == nil {
				ok.Add(1)
			}
			if ps := c.ProcessState; ps != nil {
				cpuMu.Lock()
				clientCPU += ps.UserTime() + ps.SystemTime()
				cpuMu.Unlock()
			}
		}()
	}
	wg.Wait()
	p.WallS = round3(time.Since(start).Seconds())
	w.end(&p, nil)
	p.Usage = append([]Usage{{Process: ProcSSH, CPUS: ptr(round3(clientCPU.Seconds()))}}, p.Usage...)
	p.OK = int(ok.Load())
	if ctx.Err() != nil {
		p.Error = fmt.Sprintf("interrupted after %s (the phase timeout)", b.cfg.PhaseTimeout)
	}
	return p
}

// cpu is the CPU seconds of the named processes over the phase, those not
// known left out.
func (p Phase) cpu(procs ...string) float64 {
	var s float64
	for _, u := range p.Usage {
		if u.CPUS != nil && slices.Contains(procs, u.Process) {
			s += *u.CPUS
		}
	}
	return s
}

// sshConfigHosts are the Host aliases of an ssh-config file.
func sshConfigHosts(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var hosts []string
	for line := range strings.Lines(string(b)) {
		if h, ok := strings.CutPrefix(strings.TrimSpace(line), "Host "); ok {
			hosts = append(hosts, strings.TrimSpace(h))
		}
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%s: no Host in the exported ssh-config", path)
	}
	return hosts, nil
}

// jobStall is how long the job phase waits without a node finishing.
const jobStall = 3 * time.Minute

// job waits until the coordinator holds every ready node's metric and
// finding and sees each node's job exited 0.
func (b *bench) job(ctx context.Context, nodes int) Phase {
	p := Phase{Phase: "job", Nodes: nodes}
	if nodes == 0 || b.memLow {
		p.Skipped, p.Note = true, "no ready node"
		if b.memLow {
			p.Note = "stopped at the memory floor"
		}
		return p
	}
	fmt.Fprintf(b.cfg.Log, "job: until the coordinator has every node's metric and finding\n")
	ctx, cancel := context.WithTimeout(ctx, b.cfg.PhaseTimeout)
	defer cancel()
	w := b.watch(cancel)
	start := time.Now()
	viewer, err := b.viewerToken()
	var polls int
	stalled := false
	progressAt, lastOK := time.Now(), -1
	for err == nil {
		var snap snapshot
		snap, err = b.state(ctx, viewer)
		polls++
		if err == nil {
			p.OK, b.findings = snap.done(b.cfg.Work, b.readyIDs), snap.Totals.Findings
			if p.OK >= nodes && b.findings >= int64(nodes) {
				break
			}
			if p.OK != lastOK {
				progressAt, lastOK = time.Now(), p.OK
			} else if time.Since(progressAt) > jobStall {
				// A node that will not finish (replaced after the launch,
				// its job failed) must not hold the run for the phase
				// timeout: the other phases still measure the rest.
				stalled = true
				break
			}
		}
		if err != nil && ctx.Err() == nil {
			err = nil // the coordinator busy: ask again
		}
		if !sleep(ctx, time.Second) {
			break
		}
	}
	p.WallS = round3(time.Since(start).Seconds())
	w.end(&p, nil)
	p.Note = fmt.Sprintf("%d findings stored, %d polls of the coordinator's state", b.findings, polls)
	if stalled {
		p.Note += fmt.Sprintf("; no node finished in the last %s", jobStall)
	}
	switch {
	case w.memHitNow():
		p.Error = fmt.Sprintf("stopped: available memory fell to %.0f MB, under the floor of %.0f MB", val(p.MemAvailableMinMB), mb(b.cfg.MemFloor))
		b.memLow = true
	case ctx.Err() != nil:
		p.Error = fmt.Sprintf("gave up after %s (the phase timeout)", b.cfg.PhaseTimeout)
	case err != nil:
		p.Error = err.Error()
	}
	return p
}

// snapshot is what the job phase reads of the coordinator's /api/v1/state.
type snapshot struct {
	Totals struct {
		Findings int64 `json:"findings"`
	} `json:"totals"`
	Nodes []stateNode `json:"nodes"`
}

type stateNode struct {
	InstanceID int64              `json:"instance_id"`
	Sessions   []stateSession     `json:"sessions"`
	Metrics    map[string]float64 `json:"metrics"`
}

type stateSession struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	ExitCode *int   `json:"exit_code"`
}

// done counts the ready nodes whose job exited 0 having reported all its
// work (a node the launch replaced or found surplus may have run it too).
func (s snapshot) done(work int, ready map[int64]bool) int {
	n := 0
	for _, node := range s.Nodes {
		if !ready[node.InstanceID] || node.Metrics["iters"] != float64(work) {
			continue
		}
		for _, ss := range node.Sessions {
			if ss.Name == "work" && ss.State == "exited" && ss.ExitCode != nil && *ss.ExitCode == 0 {
				n++
			}
		}
	}
	return n
}

func (b *bench) viewerToken() (string, error) {
	raw, err := os.ReadFile(filepath.Join(b.data, "coord.db-tokens.json"))
	if err != nil {
		return "", fmt.Errorf("the fleet's viewer token: %w", err)
	}
	var tokens map[string]map[string]string
	if err := json.Unmarshal(raw, &tokens); err != nil {
		return "", fmt.Errorf("the fleet's viewer token: %w", err)
	}
	t := tokens[FleetName]["viewer"]
	if t == "" {
		return "", fmt.Errorf("no viewer token for fleet %s", FleetName)
	}
	return t, nil
}

func (b *bench) state(ctx context.Context, token string) (snapshot, error) {
	var s snapshot
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.coordAddr+"/api/v1/state", nil)
	if err != nil {
		return s, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("coordinator state: HTTP %d", resp.StatusCode)
	}
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// parseLaunch reads launch --json's summary line: the nodes ready (kept
// in b.readyIDs), and the nodes replaced for short hardware or a failed
// probe.
func (b *bench) parseLaunch(out []byte) (int, string, error) {
	var ready, short, probe, rented int
	var found bool
	for line := range bytes.Lines(out) {
		var ev struct {
			Event    string  `json:"event"`
			Ready    int     `json:"ready"`
			ReadyIDs []int64 `json:"ready_ids"`
			Rented   int     `json:"rented"`
		}
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		switch ev.Event {
		case "summary":
			ready, rented, found = ev.Ready, ev.Rented, true
			b.readyIDs = map[int64]bool{}
			for _, id := range ev.ReadyIDs {
				b.readyIDs[id] = true
			}
		case "short_hardware":
			short++
		case "probe_failed":
			probe++
		}
	}
	if !found {
		return 0, "", errors.New("launch printed no summary")
	}
	note := []string{fmt.Sprintf("%d rented", rented)}
	if short > 0 {
		note = append(note, fmt.Sprintf("%d short_hardware", short))
	}
	if probe > 0 {
		note = append(note, fmt.Sprintf("%d probe_failed", probe))
	}
	return ready, strings.Join(note, ", "), nil
}

// parseRows reads exec's or sync's rows: a node is reached when its row
// has no error and, for exec, exit code 0.
func parseRows(out []byte) (int, string, error) {
	var rows []struct {
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		return 0, "", fmt.Errorf("rows: %w", err)
	}
	ok := 0
	for _, r := range rows {
		if r.ExitCode == 0 && r.Error == "" {
			ok++
		}
	}
	return ok, "", nil
}

// parseSync reads sync's rows: the nodes reached, when the last held the
// tree and the least that could take (seconds).
func parseSync(out []byte) (ok int, last, link float64, err error) {
	var rows []struct {
		DoneS float64 `json:"done_s"`
		LinkS float64 `json:"link_s"`
		Error string  `json:"error"`
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		return 0, 0, 0, fmt.Errorf("rows: %w", err)
	}
	for _, r := range rows {
		if r.Error != "" {
			continue
		}
		ok++
		last, link = max(last, r.DoneS), max(link, r.LinkS)
	}
	return ok, round3(last), round3(link), nil
}

// parseCollect reads collect's rows: a node is reached when its job's
// results file came back.
func parseCollect(out []byte) (int, string, error) {
	var rows []struct {
		Files int    `json:"files"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		return 0, "", fmt.Errorf("rows: %w", err)
	}
	ok, files := 0, 0
	for _, r := range rows {
		files += r.Files
		if r.Error == "" && r.Files > 0 {
			ok++
		}
	}
	return ok, fmt.Sprintf("%d files", files), nil
}

func parseDestroy(out []byte) (int, string, error) {
	if len(bytes.TrimSpace(out)) == 0 {
		return 0, "nothing to destroy", nil
	}
	var d struct {
		IDs []int64 `json:"ids"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		return 0, "", fmt.Errorf("destroy: %w", err)
	}
	return len(d.IDs), "", nil
}

func parseCost(out []byte) (int, string, error) {
	var c struct {
		Instances []json.RawMessage `json:"instances"`
		Total     float64           `json:"total"`
	}
	if err := json.Unmarshal(out, &c); err != nil {
		return 0, "", fmt.Errorf("cost: %w", err)
	}
	return len(c.Instances), fmt.Sprintf("%d instances billed, $%.2f in all", len(c.Instances), c.Total), nil
}

// writeTree makes the tree synced to every node: files of random
// (incompressible) bytes, the same for the same seed.
func writeTree(dir string, size int64, files int, seed int64) error {
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o700); err != nil {
		return err
	}
	rng := mrand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	each := size / int64(files)
	for i := range files {
		name := filepath.Join(dir, fmt.Sprintf("part-%03d.bin", i))
		if i%2 == 1 {
			name = filepath.Join(dir, "src", fmt.Sprintf("part-%03d.bin", i))
		}
		buf := make([]byte, each)
		rng.Read(buf)
		if err := os.WriteFile(name, buf, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// quoteArgs is args as a shell would take them back, for the report.
func quoteArgs(args []string) string {
	var sb strings.Builder
	for i, a := range args {
		if i > 0 {
			sb.WriteByte(' ')
		}
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`;&|<>(){}[]*?!#~=%") {
			sb.WriteString(a)
			continue
		}
		sb.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	return sb.String()
}

func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func mb(bytes int64) float64 { return round3(float64(bytes) / 1e6) }

// round3 keeps three decimals: the report's figures are not finer.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func val(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
