package cli

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveHarness is what the tests that kill a server with SIGKILL share:
// vastfleet and the agent built, one data dir for every server, an
// operator's client, and one log all servers append to.
type serveHarness struct {
	t        *testing.T
	bin      string // vastfleet, built: a server is a process of its own
	agentBin string
	home     string // the servers' data dir
	env      []string
	logPath  string // the servers' stdout and stderr
	log      *os.File
	// Global are the flags before each command (the market, the data
	// dir); Serve, those of every `serve` (--db, --coord-addr).
	Global, Serve []string
}

// newServeHarness builds the binaries and makes the data dir; a test
// that serves the market apart starts it with h.bin before the token.
func newServeHarness(t *testing.T) *serveHarness {
	t.Helper()
	needAgentTools(t)
	h := &serveHarness{t: t, agentBin: buildAgent(t), bin: vastfleetBinary(t), home: newEnv(t).home}
	h.env = append(os.Environ(), "VASTFLEET_HOME="+h.home, "VASTFLEET_CONFIG="+filepath.Join(t.TempDir(), "config"))
	h.Global = []string{"--data-dir", h.home}
	// Apart from the data dir: a test may delete that, as a lost machine.
	h.logPath = filepath.Join(t.TempDir(), "serve.out")
	f, err := os.Create(h.logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	h.log = f
	return h
}

// operator creates the operator token "ann" (with the token command's
// flags, such as --db) and returns a client of its own that holds it.
func (h *serveHarness) operator(flags ...string) *env {
	h.t.Helper()
	args := append(append(append([]string(nil), h.Global...), "serve", "token", "create", "ann", "--role", "operator"), flags...)
	tok, err := exec.Command(h.bin, args...).Output()
	if err != nil {
		h.t.Fatal(err)
	}
	return client(h.t, strings.TrimSpace(string(tok)))
}

// start starts a server on addr, with h.Serve and extra flags, and
// returns once it accepts connections. It is ended (SIGTERM) when the
// test ends, unless the test killed it first.
func (h *serveHarness) start(addr string, extra ...string) *exec.Cmd {
	h.t.Helper()
	args := append(append([]string(nil), h.Global...), "serve", "--addr", addr, "--agent-bin", h.agentBin)
	cmd := exec.Command(h.bin, append(append(args, h.Serve...), extra...)...)
	cmd.Env, cmd.Stdout, cmd.Stderr = h.env, h.log, h.log
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	waitFor(h.t, "the server", 60*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return cmd
}

// kill9 kills a server with SIGKILL, as a lost machine or an OOM kill.
func (h *serveHarness) kill9(srv *exec.Cmd) {
	h.t.Helper()
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		h.t.Fatal(err)
	}
	srv.Wait()
}
