package bootstrap

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// A stand-in agent: it records its environment and arguments, then waits
// to be killed, as the real one runs until the instance stops.
// fakeAgent stays the process the onstart started (no exec), as the real
// agent does: the onstart knows it by its command line.
const fakeAgent = "#!/bin/sh\nenv > \"$VASTFLEET_AGENT_DIR/env\"\necho \"$@\" > \"$VASTFLEET_AGENT_DIR/args\"\nsleep 30\n"

func digest(b string) string { s := sha256.Sum256([]byte(b)); return hex.EncodeToString(s[:]) }

// runOnstart runs script as vast would (/bin/sh -c in the container's home)
// and waits for it; the agent it starts stays behind.
func runOnstart(t *testing.T, home, script string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = home
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("onstart: %v\n%s", err, out)
	}
	return string(out)
}

func waitFile(t *testing.T, path string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
	}
}

func killAgent(home string) {
	if b, err := os.ReadFile(filepath.Join(home, ".vastfleet", "agent.pid")); err == nil {
		var pid int
		for _, c := range strings.TrimSpace(string(b)) {
			pid = pid*10 + int(c-'0')
		}
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestAgentOnstartInstallsOnceAndStartsOnce(t *testing.T) {
	for _, tool := range []string{"sh", "sha256sum", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	var downloads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.PathAgentBin || r.Header.Get("Authorization") != "Bearer agent-tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		downloads.Add(1)
		w.Write([]byte(fakeAgent))
	}))
	defer srv.Close()
	home := t.TempDir()
	t.Cleanup(func() { killAgent(home) })
	script, err := AgentOnstart("echo user-onstart > user-ran", Agent{
		CoordURL: srv.URL + "/", Fleet: "f1", Token: "agent-tok", BinarySHA256: digest(fakeAgent),
		Sessions:    []wire.Session{{Name: "work", Command: `echo '{"found":"it'"'"'s here"}'`}},
		OrphanAfter: 30 * time.Minute, OrphanPolicy: wire.PolicyDestroy, MaxLifetime: 12 * time.Hour, IdleAfter: 30 * time.Minute, IdleBelow: 2.5, TimeScale: 3000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(script) > MaxOnstart {
		t.Fatalf("onstart is %d bytes", len(script))
	}
	runOnstart(t, home, script)
	dir := filepath.Join(home, ".vastfleet")
	env := waitFile(t, filepath.Join(dir, "env"))
	for _, want := range []string{
		wire.EnvCoordURL + "=" + srv.URL + "\n", wire.EnvFleet + "=f1\n", wire.EnvToken + "=agent-tok\n",
		wire.EnvOrphanAfter + "=30m0s\n", wire.EnvOrphanPolicy + "=destroy\n", wire.EnvMaxLifetime + "=12h0m0s\n", wire.EnvIdleAfter + "=30m0s\n", wire.EnvIdleBelow + "=2.5\n", wire.EnvTimeScale + "=3000\n",
		wire.EnvStateDir + "=" + dir + "\n",
		wire.EnvSessions + `=[{"name":"work","command":"echo '{\"found\":\"it'\"'\"'s here\"}'"}]` + "\n",
	} {
		if !strings.Contains(env, want) {
			t.Errorf("agent environment lacks %q:\n%s", want, env)
		}
	}
	if a := waitFile(t, filepath.Join(dir, "args")); a != "agent\n" {
		t.Errorf("agent args %q", a)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "user-ran")); string(b) != "user-onstart\n" {
		t.Errorf("the user's onstart did not run first: %q", b)
	}
	// A restart runs the onstart again: no second download, no second agent.
	pid, _ := os.ReadFile(filepath.Join(dir, "agent.pid"))
	runOnstart(t, home, script)
	if n := downloads.Load(); n != 1 {
		t.Errorf("%d downloads after a second onstart, want 1", n)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "agent.pid")); string(again) != string(pid) {
		t.Errorf("a second agent started: pid %q then %q", pid, again)
	}
	// After a stop and start the agent is gone, and the pid it left may
	// now be another process's (a restarted container numbers its
	// processes again; a simulated machine shares this computer's): the
	// agent starts all the same. Seen: a node parked 12 s after its first
	// boot never ran its agent after the release, and its job waited.
	if _, err := os.Stat("/proc/self/cmdline"); err == nil {
		other := exec.Command("sleep", "60")
		if err := other.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { other.Process.Kill(); other.Wait() }()
		killAgent(home)
		otherPID := strconv.Itoa(other.Process.Pid)
		os.WriteFile(filepath.Join(dir, "agent.pid"), []byte(otherPID+"\n"), 0o600)
		runOnstart(t, home, script)
		if again, _ := os.ReadFile(filepath.Join(dir, "agent.pid")); strings.TrimSpace(string(again)) == otherPID {
			t.Errorf("a pid file naming another live process kept the agent from starting")
		}
	}
}

func TestAgentOnstartRefusesATamperedBinary(t *testing.T) {
	for _, tool := range []string{"sh", "sha256sum", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(fakeAgent + "# tampered\n"))
	}))
	defer srv.Close()
	home := t.TempDir()
	t.Cleanup(func() { killAgent(home) })
	script, err := AgentOnstart("", Agent{CoordURL: srv.URL, Fleet: "f", Token: "t", BinarySHA256: digest(fakeAgent)})
	if err != nil {
		t.Fatal(err)
	}
	out := runOnstart(t, home, script)
	if !strings.Contains(out, "agent download failed") {
		t.Errorf("onstart output %q does not say the download failed", out)
	}
	if _, err := os.Stat(filepath.Join(home, ".vastfleet", "vastfleet-agent")); err == nil {
		t.Error("a binary with the wrong digest was installed")
	}
}

func TestAgentOnstartRefusesBadInput(t *testing.T) {
	good := Agent{CoordURL: "http://127.0.0.1:1", Fleet: "f", Token: "t", BinarySHA256: digest("x")}
	for name, mut := range map[string]func(*Agent){
		"no scheme":  func(a *Agent) { a.CoordURL = "127.0.0.1:1" },
		"bad digest": func(a *Agent) { a.BinarySHA256 = "abc" },
		"bad pin":    func(a *Agent) { a.Fingerprint = "zz" },
		"too long":   func(a *Agent) { a.Sessions = []wire.Session{{Name: "s", Command: strings.Repeat("x", MaxOnstart)}} },
	} {
		a := good
		mut(&a)
		if _, err := AgentOnstart("", a); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Through a reverse tunnel the agent's URL is computed on the node from
// its instance id, so that every node of a simulated fleet (one shared
// loopback) dials its own tunnel, and vastfleet binds the same port.
func TestAgentOnstartTunnelURLIsTheNodesOwnPort(t *testing.T) {
	script, err := AgentOnstart("", Agent{
		CoordURL: "https://127.0.0.1:8470", Fleet: "f", Token: "tok", BinarySHA256: digest("x"),
		Fingerprint: digest("cert"), TunnelPortBase: DefaultTunnelPortBase,
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(script, "8470") {
		t.Fatalf("the onstart names the coordinator's own port:\n%s", script)
	}
	var exports []string
	for _, l := range strings.Split(script, "\n") {
		if strings.HasPrefix(l, "export ") {
			exports = append(exports, l)
		}
	}
	for _, id := range []int64{12345, 7, 40000} {
		cmd := exec.Command("/bin/sh", "-c", strings.Join(exports, "\n")+"\necho \"$"+wire.EnvCoordURL+"\"")
		cmd.Env = []string{"CONTAINER_ID=" + strconv.FormatInt(id, 10), "PATH=" + os.Getenv("PATH")}
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		want := "https://127.0.0.1:" + strconv.Itoa(TunnelPort(DefaultTunnelPortBase, id))
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("instance %d: URL %q, want %q", id, got, want)
		}
	}
	if _, err := AgentOnstart("", Agent{CoordURL: "http://x", BinarySHA256: digest("x"), TunnelPortBase: 60000}); err == nil {
		t.Error("a port range past 65535 was accepted")
	}
}
