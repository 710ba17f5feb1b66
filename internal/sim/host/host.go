// Package host is the machine behind a simulated vast.ai instance: a
// directory that serves as the container's /root and /workspace, the
// instance's onstart run with bash -c and vast's variables, an SSH server
// (exec, shell, PTY, signals, SFTP, -L and -R forwards) on a loopback port, and process groups
// so that stop and destroy end everything the instance started.
//
// The package knows nothing of the market: the simulator tells it when an
// instance boots, stops, goes dark or is destroyed, and which keys it
// accepts. It never decides anything by itself, so the market stays
// deterministic while real processes run.
//
// What is not a container: there is no filesystem or network namespace.
// HOME and the working directory are the instance directory, but an
// absolute path such as /root/x is the real /root/x; a program listening on
// a port asked with -p must listen on $VAST_TCP_PORT_<p> (identity mapping,
// as vast's identity ports), since every instance shares loopback.
package host

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/procgroup"
	"github.com/vastfleet/vastfleet/internal/sshkey"
)

// Dark is how an instance's SSH port behaves while the instance does not
// run: Refuse closes it (connection refused), Hang keeps it open without
// ever answering (a host that went away behind a NAT).
type Dark int

const (
	Refuse Dark = iota
	Hang
)

// Spec is what a machine needs to boot. The simulator builds it from the
// instance record on every boot.
type Spec struct {
	ID int64
	// Env is the onstart's environment beyond the process basics (PATH,
	// HOME): vast's variables and the user's --env values, as KEY=VALUE.
	Env []string
	// SessionEnv is what SSH sessions see: vast documents that custom
	// --env values are not visible there.
	SessionEnv []string
	Onstart    string
	// Keys are the authorized public keys (authorized_keys lines).
	Keys []string
	// Ports are the SSH ports to bind on 127.0.0.1 (0: any free one):
	// the proxy route, and the direct one when the instance has it.
	Ports []int
	// Hang: accept TCP but never answer SSH (a handshake that hangs).
	Hang bool
	// DropAfter > 0 closes every SSH connection after it has carried
	// that many bytes (a connection dropped mid-session).
	DropAfter int64
	// FailOnstart replaces the onstart with one that exits 1.
	FailOnstart bool
	// Hardware is what the machine truly has (hardware.go): its CPU duty
	// cycle and the GPUs its nvidia-smi lists.
	Hardware Hardware
	// Link paces the machine's SSH traffic (link.go); zero: unpaced.
	Link Link
}

// Manager holds the machines of one simulator, under one root directory.
type Manager struct {
	root    string
	signer  gossh.Signer
	log     *slog.Logger
	mu      sync.Mutex
	running map[int64]*machine
	hung    map[int64][]net.Listener // silent ports of machines gone dark
	closed  bool                     // by Close: no machine boots after it
	// removing counts destroyed directories still being deleted.
	removing sync.WaitGroup
	sweep    sweeper
	cpu      cpuAccount // the machines' cpu.stat (cpustat.go)
	// The capacity model's cgroup directory (capacity.go), made at the
	// first machine that needs it; capErr says why it cannot be.
	capOnce   sync.Once
	capDir    string
	capErr    error
	capWarned sync.Once
	// capRemoving counts machines' cgroups still being removed.
	capRemoving sync.WaitGroup
	// capWatched are the machines whose processes the mover sorts (the
	// onstart's group beside each), while capMoving.
	capMu      sync.Mutex
	capWatched map[*capacity]int
	capMoving  bool
}

// sweeper kills, in the background, the processes of stopped machines
// that left their process groups (the agent and its sessions, daemons).
// One pass over /proc serves every machine stopped since the last: a pass
// per stop, each reading every process's environment, made destroying a
// fleet of N cost N passes over N machines' processes, under the market's
// lock (1,000 nodes: destroys timed out for minutes).
type sweeper struct {
	mu      sync.Mutex
	pending map[string]int // a machine's marker prefix (every boot): passes still to make
	running bool
	wg      sync.WaitGroup
}

// sweepPasses: a process forked between one pass's reading of /proc and
// its kill is found by the next.
const sweepPasses = 2

// sweepLater has the marked processes of every boot of a machine frozen
// and killed by the next passes (one of a boot before this simulator ran,
// which kept running when its simulator died, as well), except those of
// the machine's boot running when the pass is made.
func (m *Manager) sweepLater(prefix string) {
	s := &m.sweep
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = map[string]int{}
	}
	s.pending[prefix] = sweepPasses
	if !s.running {
		s.running = true
		s.wg.Add(1)
		go m.sweepLoop()
	}
}

func (m *Manager) sweepLoop() {
	s := &m.sweep
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if len(s.pending) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		prefixes := make(map[string]string, len(s.pending)) // → the running boot's marker, spared
		for k := range s.pending {
			prefixes[k] = ""
		}
		s.mu.Unlock()
		// /proc is read without the lock: with a thousand machines on a
		// busy computer a pass takes seconds, and every boot and stop (so
		// every create and destroy of the market) waits on m.mu. Which
		// boot runs is read after it, under the lock: a boot started
		// during the read is the one running then, and spared.
		found := procgroup.EnvEntries(func(e string) bool {
			if !strings.HasPrefix(e, markerKey) {
				return false
			}
			_, ok := prefixes[bootPrefix(e)]
			return ok
		})
		m.mu.Lock()
		for _, mc := range m.running { // one boot runs per machine
			p := bootPrefix(mc.marker)
			if _, pending := prefixes[p]; pending {
				prefixes[p] = mc.marker
			}
		}
		var kill []int
		for pid, e := range found {
			if e != prefixes[bootPrefix(e)] {
				kill = append(kill, pid)
			}
		}
		// Frozen together, then killed: as a container goes down at once,
		// no supervisor (the agent) sees its child die and reports it.
		procgroup.KillAll(kill)
		m.mu.Unlock()
		s.mu.Lock()
		for k := range prefixes {
			if s.pending[k]--; s.pending[k] <= 0 {
				delete(s.pending, k)
			}
		}
		s.mu.Unlock()
	}
}

// New opens (creating) the root directory and the shared host key.
func New(root string, log *slog.Logger) (*Manager, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	signer, err := hostKey(filepath.Join(root, "ssh_host_ed25519_key"))
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Manager{root: root, signer: signer, log: log, running: map[int64]*machine{}}, nil
}

// hostKey loads or creates the machines' SSH host key, so a restarted
// simulator keeps its identity for clients that pinned it.
func hostKey(path string) (gossh.Signer, error) {
	return sshkey.LoadOrCreate(path, "vastfleet simulator host")
}

// Dir is the instance's directory: its /root and /workspace.
func (m *Manager) Dir(id int64) string {
	return filepath.Join(m.root, strconv.FormatInt(id, 10), "root")
}

// LogPath is the instance's container log: the onstart's and the SSH
// sessions' stdout and stderr.
func (m *Manager) LogPath(id int64) string {
	return filepath.Join(m.root, strconv.FormatInt(id, 10), "container.log")
}

// ReservePort finds a free loopback port for an instance to use later.
func ReservePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Boot starts the instance: its directory and vast's files, the SSH
// listeners, then the onstart. A machine already running is stopped first
// (a reboot). It returns the SSH ports actually bound, which differ from
// spec.Ports only where a port was taken meanwhile.
func (m *Manager) Boot(spec Spec) ([]int, error) {
	m.Stop(spec.ID, Refuse)
	dir := m.Dir(spec.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	mc := &machine{id: spec.ID, mgr: m, dir: dir, logPath: m.LogPath(spec.ID), pgids: map[int]bool{}}
	mc.setKeys(spec.Keys)
	bin := ""
	if len(spec.Hardware.GPUs) > 0 {
		bin = m.binDir(spec.ID)
	}
	if err := m.writeTools(spec.ID, spec.Hardware); err != nil {
		m.log.Warn("sim host: writing the machine's tools", "id", spec.ID, "err", err)
	}
	if err := m.writeCgroup(spec.ID, spec.Hardware); err != nil {
		m.log.Warn("sim host: writing the machine's cgroup files", "id", spec.ID, "err", err)
	}
	cg := cgroupEnv + "=" + m.cgroupDir(spec.ID)
	mc.env = append(baseEnv(dir, bin), append(spec.Env, cg)...)
	mc.sessionEnv = append(baseEnv(dir, bin), append(spec.SessionEnv, cg)...)
	mc.marker = fmt.Sprintf("%s%d/%d", m.everyMachine(), spec.ID, time.Now().UnixNano())
	m.closeHung(spec.ID)
	if len(spec.Ports) == 0 {
		spec.Ports = []int{0}
	}
	var bound []int
	for _, p := range spec.Ports {
		ln, err := listen(p)
		if err != nil {
			for _, l := range mc.lns {
				l.Close()
			}
			return nil, err
		}
		mc.lns = append(mc.lns, ln)
		bound = append(bound, ln.Addr().(*net.TCPAddr).Port)
	}
	if spec.Hang {
		mc.hang = true // the listener stays open and nothing accepts
	} else {
		mc.serve(spec.DropAfter, spec.Link)
	}
	m.mu.Lock()
	if m.closed {
		// Closed while it booted: its sweep has passed, so nothing of
		// this machine may start.
		m.mu.Unlock()
		mc.stop(Refuse, false)
		return nil, errors.New("sim host: the simulator is stopping")
	}
	m.running[spec.ID] = mc
	m.mu.Unlock()
	if err := mc.writeFiles(spec); err != nil {
		m.log.Warn("sim host: writing instance files", "id", spec.ID, "err", err)
	}
	if budget := spec.Hardware.CPUBudget(); budget > 0 {
		c, err := m.newCapacity(spec.ID, budget)
		if err != nil {
			m.capWarned.Do(func() {
				m.log.Warn("sim host: no capacity model (machines share this computer's cores alike)", "err", err)
			})
		}
		mc.cap = c
	}
	mc.runOnstart(spec)
	mc.startGovernor(spec.Hardware.Duty())
	m.countCPU()
	return bound, nil
}

func listen(port int) (net.Listener, error) {
	if port > 0 {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// Shell runs onstart and SSH commands: bash, as in vast's images, where
// this machine has it, else /bin/sh.
var Shell = func() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}()

// baseEnv is what every process of an instance starts from; bin, when
// set, holds the machine's simulated tools and comes first on PATH.
func baseEnv(dir, bin string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	if bin != "" {
		path = bin + string(os.PathListSeparator) + path
	}
	// TMUX_TMPDIR: each instance has its own tmux server, as each
	// container would.
	return []string{"HOME=" + dir, "PATH=" + path, "USER=root", "LOGNAME=root", "SHELL=" + Shell, "LANG=C.UTF-8", "TMUX_TMPDIR=" + dir}
}

// SetKeys replaces the keys a running machine accepts (a key attached).
func (m *Manager) SetKeys(id int64, keys []string) {
	m.mu.Lock()
	mc := m.running[id]
	m.mu.Unlock()
	if mc != nil {
		mc.setKeys(keys)
	}
}

// Running lists the machines that run now.
func (m *Manager) Running() []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int64, 0, len(m.running))
	for id := range m.running {
		out = append(out, id)
	}
	return out
}

// Stop kills the instance's processes and takes its SSH port down: closed
// with Refuse, left open and silent with Hang until Destroy or the next
// Boot. Its files stay.
func (m *Manager) Stop(id int64, dark Dark) {
	m.mu.Lock()
	mc := m.running[id]
	delete(m.running, id)
	m.mu.Unlock()
	if mc == nil {
		return
	}
	mc.stop(dark, false)
	if dark == Hang {
		m.mu.Lock()
		// Kept so that Boot or Destroy can close the silent listener.
		m.dark(id, mc)
		m.mu.Unlock()
	}
}

// dark remembers hung listeners; m.mu is held.
func (m *Manager) dark(id int64, mc *machine) {
	if m.hung == nil {
		m.hung = map[int64][]net.Listener{}
	}
	for _, old := range m.hung[id] {
		old.Close()
	}
	m.hung[id] = mc.lns
}

// Destroy kills everything and deletes the instance's directory and log.
// The directory is gone at once (renamed away); its removal finishes in
// the background, since a process that was just killed may still complete
// a write into it. Close waits for it.
func (m *Manager) Destroy(id int64) error {
	m.Stop(id, Refuse)
	m.closeHung(id)
	dir := filepath.Join(m.root, strconv.FormatInt(id, 10))
	trash := filepath.Join(m.root, fmt.Sprintf(".destroyed-%d-%d", id, time.Now().UnixNano()))
	if err := os.Rename(dir, trash); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	m.removing.Add(1)
	go func() {
		defer m.removing.Done()
		var err error
		for range 100 {
			if err = os.RemoveAll(trash); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		m.log.Warn("sim host: removing a destroyed instance's directory", "dir", trash, "err", err)
	}()
	return nil
}

func (m *Manager) closeHung(id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ln := range m.hung[id] {
		ln.Close()
	}
	delete(m.hung, id)
}

// Close stops every machine (their files stay, for a simulator that opens
// the same root again).
func (m *Manager) Close() error {
	// Every machine's processes are frozen, then killed, in one sweep of
	// /proc first. Stopped one by one, each machine sweeps it twice: a
	// thousand machines read every process's environment two thousand
	// times, minutes under load, and a simulator given half a minute to
	// stop was killed with its machines' processes still running.
	m.mu.Lock()
	m.closed = true
	all := make([]*machine, 0, len(m.running))
	for id, mc := range m.running {
		all = append(all, mc)
		delete(m.running, id)
	}
	m.mu.Unlock()
	for _, mc := range all {
		mc.stopGovernor()
		mc.mu.Lock()
		mc.stopped = true // and nothing of it starts from here on
		mc.mu.Unlock()
	}
	m.stopCPU()
	procgroup.KillMarked(m.everyMachine())
	for _, mc := range all {
		mc.stop(Refuse, true)
	}
	m.sweep.wg.Wait()
	m.mu.Lock()
	ids := slices.Collect(maps.Keys(m.hung))
	m.mu.Unlock()
	for _, id := range ids {
		m.closeHung(id)
	}
	m.removing.Wait()
	m.capRemoving.Wait()
	return nil
}

// machine is one running instance.
type machine struct {
	id         int64
	mgr        *Manager
	dir        string
	logPath    string
	env        []string
	sessionEnv []string
	marker     string // in every process's environment, to find escapees
	lns        []net.Listener
	hang       bool
	srv        interface{ Close() error }
	gov        *governor // the CPU duty cycle of a machine short of cores
	cap        *capacity // its cgroups under the capacity model, or nil

	mu      sync.Mutex
	keys    []gossh.PublicKey
	managed map[string]bool // every key vast ever set, marshalled (authkeys.go)
	pgids   map[int]bool
	stopped bool
	// procs counts the goroutines that wait for the instance's processes;
	// stop waits for them, so nothing writes into the directory after it.
	procs sync.WaitGroup
}

func (mc *machine) setKeys(lines []string) {
	var keys []gossh.PublicKey
	for _, l := range lines {
		k, _, _, _, err := gossh.ParseAuthorizedKey([]byte(l))
		if err != nil {
			mc.mgr.log.Warn("sim host: unparsable authorized key", "id", mc.id, "err", err)
			continue
		}
		keys = append(keys, k)
	}
	mc.mu.Lock()
	mc.keys = keys
	if mc.managed == nil {
		mc.managed = map[string]bool{}
	}
	for _, k := range keys {
		mc.managed[string(k.Marshal())] = true
	}
	mc.mu.Unlock()
}

func (mc *machine) authorized(k gossh.PublicKey) bool {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	b := k.Marshal()
	for _, have := range mc.keys {
		if string(have.Marshal()) == string(b) {
			return true
		}
	}
	return false
}

// writeFiles lays down what a vast container holds in /root.
func (mc *machine) writeFiles(spec Spec) error {
	var errs []error
	write := func(name, body string, mode os.FileMode) {
		errs = append(errs, os.WriteFile(filepath.Join(mc.dir, name), []byte(body), mode))
	}
	write("onstart.sh", spec.Onstart+"\n", 0o700)
	env := map[string]string{}
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	write(".vast_containerlabel", env["VAST_CONTAINERLABEL"], 0o600)
	write(".vast_api_key", env["CONTAINER_API_KEY"], 0o600)
	if err := os.MkdirAll(filepath.Join(mc.dir, ".ssh"), 0o700); err == nil {
		write(filepath.Join(".ssh", "authorized_keys"), strings.Join(spec.Keys, "\n")+"\n", 0o600)
	}
	return errors.Join(errs...)
}

// markBooted leaves /root/hasbooted once the first boot's onstart is
// done, as vast's containers show it: a guard `[ -f hasbooted ]` in the
// onstart then tells a restart from the first boot.
func (mc *machine) markBooted() {
	mc.mu.Lock()
	stopped := mc.stopped
	mc.mu.Unlock()
	if stopped {
		return
	}
	p := filepath.Join(mc.dir, "hasbooted")
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o600); err == nil {
			f.Close()
		}
	}
}

// openLog opens the container log for appending; each process holds its
// own descriptor, so an idle machine holds none.
func (mc *machine) openLog() (*os.File, error) {
	return os.OpenFile(mc.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
}

// runOnstart runs the onstart in its own process group, its output going to
// the container log. It does not wait: the market never waits on a process.
func (mc *machine) runOnstart(spec Spec) {
	script := spec.Onstart
	if spec.FailOnstart {
		script = "echo 'onstart: simulated failure (sim fault onstart-fail)' >&2; exit 1"
	}
	if strings.TrimSpace(script) == "" {
		mc.markBooted()
		return
	}
	logf, err := mc.openLog()
	if err != nil {
		mc.mgr.log.Warn("sim host: container log", "id", mc.id, "err", err)
		return
	}
	cmd := exec.Command(Shell, "-c", script)
	if mc.cap != nil {
		args := mc.cap.wrap(Shell, script)
		cmd = exec.Command(args[0], args[1:]...)
	}
	cmd.Dir = mc.dir
	cmd.Env = append(append([]string{}, mc.env...), mc.marker)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logf, logf
	procgroup.Own(cmd)
	err = mc.start(cmd)
	if err != nil {
		fmt.Fprintf(logf, "onstart: %v\n", err)
	}
	logf.Close() // the child holds its own copy
	if err != nil {
		return
	}
	if mc.cap != nil {
		mc.cap.watch(cmd.Process.Pid) // its group is its own (procgroup.Own)
	}
	go func() {
		defer mc.forget(cmd.Process.Pid)
		err := cmd.Wait()
		mc.markBooted()
		if err != nil {
			if f, ferr := mc.openLog(); ferr == nil {
				fmt.Fprintf(f, "onstart: %v\n", err)
				f.Close()
			}
		}
	}()
}

// start starts cmd unless the machine has stopped, and remembers its
// process group.
func (mc *machine) start(cmd *exec.Cmd) error {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.stopped {
		return errors.New("instance is not running")
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	mc.pgids[cmd.Process.Pid] = true
	mc.procs.Add(1)
	return nil
}

// forget is called once a started process has been waited for.
func (mc *machine) forget(pgid int) {
	mc.mu.Lock()
	delete(mc.pgids, pgid)
	mc.mu.Unlock()
	mc.procs.Done()
}

// bootPrefix is a marker entry less its boot: every boot of the machine.
func bootPrefix(marker string) string { return marker[:strings.LastIndex(marker, "/")+1] }

// everyMachine begins the environment entry that marks every process of
// every machine of this manager.
func (m *Manager) everyMachine() string { return markerKey + m.root + "/" }

// markerKey names the environment entry that marks a machine's processes.
const markerKey = "VASTFLEET_SIM_MACHINE="

// stop ends the SSH server and every process the instance started; swept
// says that the manager has already killed every marked process.
func (mc *machine) stop(dark Dark, swept bool) {
	// The duty cycle ends first: a continue sent between the freeze and
	// the kill below would let one process see another die.
	mc.stopGovernor()
	mc.mu.Lock()
	mc.stopped = true
	pgids := make([]int, 0, len(mc.pgids))
	for p := range mc.pgids {
		pgids = append(pgids, p)
	}
	mc.mu.Unlock()
	if !(mc.hang && dark == Hang) {
		if mc.srv != nil {
			mc.srv.Close() // and every connection
		}
		for i, ln := range mc.lns {
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			if dark == Hang {
				// The same port, open and silent: connections complete and hang.
				if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
					mc.lns[i] = l
				}
			}
		}
	}
	// The groups it started go now, frozen before any is killed, as a
	// container goes down at once: otherwise a supervisor killed after
	// its child sees the child die and reports it, which a real host
	// never lets it. What left them (the agent under nohup, its sessions)
	// goes with the sweeper's next pass, moments later.
	for _, sig := range []syscall.Signal{procgroup.SIGSTOP, syscall.SIGKILL} {
		for _, p := range pgids {
			procgroup.Kill(p, sig)
		}
	}
	if !swept {
		mc.mgr.sweepLater(bootPrefix(mc.marker))
	}
	if mc.cap != nil {
		mc.cap.stop()
	}
	// Killed processes are reaped within moments; a bound keeps a stuck
	// wait (a session still sending) from holding the caller.
	done := make(chan struct{})
	go func() { mc.procs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		mc.mgr.log.Warn("sim host: processes not reaped after kill", "id", mc.id)
	}
}
