package host

import (
	"github.com/vastfleet/vastfleet/internal/procgroup"

	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"
)

// testKey is a fresh client key and its authorized_keys line.
func testKey(t *testing.T) (gossh.Signer, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := gossh.NewPublicKey(pub)
	return s, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(sp)))
}

func dial(port int, key gossh.Signer) (*gossh.Client, error) {
	return gossh.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port), &gossh.ClientConfig{
		User: "root", Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second,
	})
}

func run(t *testing.T, c *gossh.Client, cmd string) (string, error) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Two buffers: bytes.Buffer's ReadFrom, which io.Copy uses, is not
	// safe from two copying goroutines at once.
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	err = s.Run(cmd)
	return out.String() + errb.String(), err
}

// waitFile waits (in real time: a real process is writing it) for path.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
	return ""
}

func TestBootSSHStopStart(t *testing.T) {
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	key, line := testKey(t)
	other, _ := testKey(t)
	spec := Spec{
		ID:         4711,
		Env:        []string{"CONTAINER_ID=4711", "VAST_CONTAINERLABEL=C.4711", "CONTAINER_API_KEY=k", "MYVAR=x"},
		SessionEnv: []string{"CONTAINER_ID=4711", "VAST_CONTAINERLABEL=C.4711"},
		Onstart:    `echo "boot $CONTAINER_ID $MYVAR"; if [ ! -f hasbooted ]; then touch hasbooted; echo first > boots; else echo again >> boots; fi`,
		Keys:       []string{line},
	}
	ports, err := m.Boot(spec)
	if err != nil {
		t.Fatal(err)
	}
	port := ports[0]
	dir := m.Dir(4711)
	if got := waitFile(t, filepath.Join(dir, "boots")); got != "first\n" {
		t.Fatalf("boots after first boot: %q", got)
	}

	c, err := dial(port, key)
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(t, c, `echo $CONTAINER_ID; pwd; echo "[$MYVAR]"`)
	if err != nil {
		t.Fatal(err, out)
	}
	if want := "4711\n" + dir + "\n[]\n"; out != want {
		t.Fatalf("session output %q, want %q", out, want)
	}
	if _, err := run(t, c, "exit 7"); err == nil {
		t.Fatal("exit 7 reported success")
	} else if ee := (*gossh.ExitError)(nil); !errors.As(err, &ee) || ee.ExitStatus() != 7 {
		t.Fatalf("exit 7: %v", err)
	}

	if _, err := dial(port, other); err == nil {
		t.Fatal("a key that was never authorized got in")
	}

	// A long-running session process, then stop: the process and the port
	// are gone, the files stay.
	s, _ := c.NewSession()
	if err := s.Start("echo $$ > sleeper.pid; exec sleep 300"); err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "sleeper.pid"))))
	m.Stop(4711, Refuse)
	if err := waitGone(pid); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
		conn.Close()
		t.Fatal("port still answers after stop")
	}
	if _, err := os.Stat(filepath.Join(dir, "hasbooted")); err != nil {
		t.Fatal("files lost on stop:", err)
	}

	spec.Ports = []int{port}
	ports2, err := m.Boot(spec)
	if err != nil {
		t.Fatal(err)
	}
	if ports2[0] != port {
		t.Logf("port moved from %d to %d", port, ports2[0])
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(dir, "boots"))
		if string(b) == "first\nagain\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("boots after restart: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	log, _ := os.ReadFile(m.LogPath(4711))
	if n := strings.Count(string(log), "boot 4711 x"); n != 2 {
		t.Fatalf("container log has %d onstart lines, want 2:\n%s", n, log)
	}
	if err := m.Destroy(4711); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("directory left after destroy")
	}
}

// waitGone waits until pid has ended (a killed child of this process is
// reaped by its Wait goroutine).
func waitGone(pid int) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if gone(pid) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("process " + strconv.Itoa(pid) + " still alive after stop")
}

// TestSessions: stdin, a PTY, signals and SFTP, as an SSH client uses them;
// and the hasbooted marker a vast container shows after its first boot.
func TestSessions(t *testing.T) {
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	key, line := testKey(t)
	ports, err := m.Boot(Spec{ID: 7, Keys: []string{line}, Onstart: "echo booting"})
	if err != nil {
		t.Fatal(err)
	}
	dir := m.Dir(7)
	waitFileExists(t, filepath.Join(dir, "hasbooted")) // left once the onstart is done
	c, err := dial(ports[0], key)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// stdin reaches the command; its end ends the command.
	s, _ := c.NewSession()
	s.Stdin = strings.NewReader("one\ntwo\n")
	out, err := s.Output("wc -l")
	if err != nil || strings.TrimSpace(string(out)) != "2" {
		t.Fatalf("wc -l of two lines: %q, %v", out, err)
	}
	s.Close()

	// A PTY: the command sees a terminal of the asked size.
	s, _ = c.NewSession()
	if err := s.RequestPty("xterm", 40, 100, gossh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	out, err = s.Output("test -t 1 && echo tty; stty size; echo $TERM")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.ReplaceAll(string(out), "\r", ""); got != "tty\n40 100\nxterm\n" {
		t.Errorf("pty session printed %q", got)
	}
	s.Close()

	// A signal reaches the process group; the exit status says so.
	s, _ = c.NewSession()
	if err := s.Start("echo $$ > sig.pid; sleep 300"); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "sig.pid"))
	if err := s.Signal(gossh.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var ee *gossh.ExitError
	if err := s.Wait(); !errors.As(err, &ee) || ee.ExitStatus() != 128+int(syscall.SIGTERM) {
		t.Errorf("after SIGTERM: %v, want exit %d", err, 128+int(syscall.SIGTERM))
	}

	// SFTP: relative paths are the instance directory.
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	f, err := sc.Create("up.txt")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("via sftp"))
	f.Close()
	if b, err := os.ReadFile(filepath.Join(dir, "up.txt")); err != nil || string(b) != "via sftp" {
		t.Errorf("sftp upload: %q, %v", b, err)
	}
	if wd, err := sc.Getwd(); err != nil || wd != dir {
		t.Errorf("sftp working directory %q, %v; want %s", wd, err, dir)
	}
}

// TestHangAndDrop: a handshake that hangs, and a connection dropped once
// it has carried its allowance.
func TestHangAndDrop(t *testing.T) {
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	key, line := testKey(t)
	ports, _ := m.Boot(Spec{ID: 1, Keys: []string{line}, Hang: true})
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(ports[0]), time.Second)
	if err != nil {
		t.Fatalf("a hanging host refused TCP: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var b [32]byte
	if n, err := conn.Read(b[:]); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a hanging host said %q (%v)", b[:n], err)
	}
	conn.Close()

	ports, _ = m.Boot(Spec{ID: 2, Keys: []string{line}, DropAfter: 16 << 10})
	c, err := dial(ports[0], key)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := run(t, c, "head -c 1000000 /dev/zero")
	if err == nil || len(out) >= 1000000 {
		t.Fatalf("a dropping host carried %d bytes without error", len(out))
	}
}

func waitFileExists(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

// TestCloseKillsEveryMachine: closing the manager (the simulator stopping)
// kills every machine's processes, those that left their group included,
// and leaves none of them for init to keep running.
func TestCloseKillsEveryMachine(t *testing.T) {
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for id := int64(1); id <= 3; id++ {
		if _, err := m.Boot(Spec{ID: id, Onstart: `sleep 300 & setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' < /dev/null > /dev/null 2>&1 &`}); err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(m.Dir(id), "daemon.pid"))))
		if pid == 0 {
			t.Fatal("no daemon pid")
		}
		pids = append(pids, pid)
	}
	marker := m.everyMachine()
	if n := len(procgroup.MarkedPIDs(marker)); n < 6 {
		t.Fatalf("%d marked processes before the close, want at least 6", n)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := waitGone(pid); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		live := 0
		for _, pid := range procgroup.MarkedPIDs(marker) {
			if !gone(pid) {
				live++
			}
		}
		if live == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d marked processes outlived the close", live)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gone: the process has ended. A zombie counts: one that is not this
// process's child waits for init to reap it, and in a container init may
// never do it.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && strings.Contains(string(b), ") Z ")
}

// TestStopKillsEscapees: a process that left the instance's process group
// (setsid, as daemons and tmux do) still dies with a stop.
func TestStopKillsEscapees(t *testing.T) {
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Boot(Spec{ID: 3, Onstart: `setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' < /dev/null > /dev/null 2>&1 &`}); err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(m.Dir(3), "daemon.pid"))))
	if pid == 0 {
		t.Fatal("no daemon pid")
	}
	m.Stop(3, Refuse)
	// Not our child, so nothing reaps it: a zombie counts as gone.
	if err := waitGone(pid); err != nil {
		t.Fatal(err)
	}
}
