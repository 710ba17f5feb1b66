package vast

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/provider/providertest"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// sshKeyPair is a client key: its signer, authorized_keys line and a
// private key file for OpenSSH.
type sshKeyPair struct {
	signer gossh.Signer
	line   string
	file   string
}

func newKeyPair(t *testing.T) sshKeyPair {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := gossh.NewSignerFromKey(priv)
	sp, _ := gossh.NewPublicKey(pub)
	blk, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(f, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	return sshKeyPair{signer: s, line: strings.TrimSpace(string(gossh.MarshalAuthorizedKey(sp))) + " test@vastfleet", file: f}
}

func sshDial(addr string, k sshKeyPair) (*gossh.Client, error) {
	return gossh.Dial("tcp", addr, &gossh.ClientConfig{
		User: "root", Auth: []gossh.AuthMethod{gossh.PublicKeys(k.signer)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second,
	})
}

func sshRun(t *testing.T, addr string, k sshKeyPair, cmd string) string {
	t.Helper()
	c, err := sshDial(addr, k)
	if err != nil {
		t.Fatalf("ssh %s: %v", addr, err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Output(cmd)
	if err != nil {
		t.Fatalf("ssh %s %q: %v", addr, cmd, err)
	}
	return string(out)
}

// eventually polls cond in real time: a real process is doing the work.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runUntil advances the simulated clock until the instance has status.
func (e *simEnv) runUntil(t *testing.T, id int64, status string) provider.Instance {
	t.Helper()
	for i := 0; i < 400; i++ {
		in, err := e.c.ShowInstance(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if in.Status() == status {
			return in
		}
		e.clock.Advance(10 * time.Second)
	}
	t.Fatalf("instance %d never reached %s", id, status)
	return provider.Instance{}
}

// assertLoopback fails on any address in the instance row (every string
// field, ports included) that is not this machine's loopback.
func assertLoopback(t *testing.T, in provider.Instance) {
	t.Helper()
	var row map[string]any
	b, _ := json.Marshal(in)
	json.Unmarshal(b, &row)
	host, port, ok := provider.SSHAddr(in)
	if !ok || host != "127.0.0.1" || port <= 0 {
		t.Errorf("instance %d ssh address %s:%d (ok %v), want 127.0.0.1", in.ID, host, port, ok)
	}
	if u := provider.SSHURL(in); !strings.HasPrefix(u, "ssh://root@127.0.0.1:") {
		t.Errorf("instance %d ssh url %q", in.ID, u)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(path+"."+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), x)
			}
		case string:
			if ip := net.ParseIP(v); ip != nil && !ip.IsLoopback() {
				t.Errorf("instance %d %s = %s: not loopback", in.ID, path, v)
			}
			if strings.Contains(v, "vast.ai") {
				t.Errorf("instance %d %s = %s: names a vast.ai host", in.ID, path, v)
			}
		}
	}
	walk("row", row)
}

func TestSimulatedInstanceRunsOnLoopback(t *testing.T) {
	ctx := context.Background()
	e := newSimEnv(t, sim.Config{Seed: 7, HostDir: t.TempDir()}, nil)
	t.Cleanup(func() { e.m.Close() })
	a, b := newKeyPair(t), newKeyPair(t)

	reg, err := e.c.RegisterSSHKey(ctx, a.line)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := e.c.ListSSHKeys(ctx); err != nil || len(keys) != 1 || keys[0].ID != reg.ID || keys[0].PublicKey != a.line {
		t.Fatalf("account keys %+v, %v; want the one registered (%d)", keys, err, reg.ID)
	}
	if _, err := e.c.RegisterSSHKey(ctx, "-----BEGIN OPENSSH PRIVATE KEY-----"); err == nil {
		t.Fatal("a private key was accepted")
	}

	offers, err := e.c.SearchOffers(ctx, providertest.SearchQuery(10))
	if err != nil || len(offers) < 2 {
		t.Fatalf("offers: %d, %v", len(offers), err)
	}
	onstart := `if [ ! -f hasbooted ]; then touch hasbooted; echo first >> boots; else echo again >> boots; fi
echo "onstart $CONTAINER_ID $MYVAR $VAST_CONTAINERLABEL $PUBLIC_IPADDR"
echo "$VAST_TCP_PORT_8080" > port8080`
	create := func(offer int64) int64 {
		c, err := e.c.CreateInstance(ctx, offer, provider.CreateRequest{
			Image: "ubuntu:22.04", Disk: 10, Runtype: "ssh_direc ssh_proxy", Label: "simhost",
			Env: map[string]string{"-p 8080:8080": "1", "MYVAR": "hello"}, Onstart: onstart})
		if err != nil {
			t.Fatal(err)
		}
		return c.NewContract
	}
	id, other := create(offers[0].ID), create(offers[1].ID)
	if other == id {
		t.Fatal("two creates, one id")
	}
	in := e.runUntil(t, id, provider.StateRunning)
	e.runUntil(t, other, provider.StateRunning)
	dir := e.m.HostDir(id)

	l, err := e.c.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range l.Instances {
		assertLoopback(t, row)
	}
	if in.Ports["8080/tcp"] == nil {
		t.Fatalf("ports %v: no 8080/tcp", in.Ports)
	}
	direct, _, _ := provider.SSHAddr(in)
	directAddr := net.JoinHostPort(direct, in.Ports["22/tcp"][0].HostPort)
	proxyAddr := net.JoinHostPort(in.SSHHost, strconv.Itoa(in.SSHPort))

	eventually(t, "onstart ran", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "boots"))
		return string(b) == "first\n"
	})
	var port8080 []byte
	eventually(t, "onstart wrote $VAST_TCP_PORT_8080", func() bool {
		port8080, _ = os.ReadFile(filepath.Join(dir, "port8080"))
		return strings.HasSuffix(string(port8080), "\n")
	})
	if strings.TrimSpace(string(port8080)) != in.Ports["8080/tcp"][0].HostPort {
		t.Errorf("VAST_TCP_PORT_8080 = %q, listing says %s", port8080, in.Ports["8080/tcp"][0].HostPort)
	}

	// Both routes answer with the instance's id and directory.
	want := fmt.Sprintf("%d\n%s\n", id, dir)
	for _, addr := range []string{directAddr, proxyAddr} {
		if got := sshRun(t, addr, a, "echo $CONTAINER_ID; pwd"); got != want {
			t.Errorf("ssh %s: %q, want %q", addr, got, want)
		}
	}
	if ssh, err := exec.LookPath("ssh"); err == nil {
		_, port, _ := net.SplitHostPort(directAddr)
		cmd := exec.Command(ssh, "-p", port, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
			"-o", "BatchMode=yes", "-o", "LogLevel=error", "-i", a.file, "root@127.0.0.1", "echo $CONTAINER_ID; pwd")
		out, err := cmd.Output()
		if err != nil || string(out) != want {
			t.Errorf("OpenSSH: %q, %v; want %q", out, err, want)
		}
		cmd = exec.Command(ssh, "-p", port, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
			"-o", "BatchMode=yes", "-i", b.file, "root@127.0.0.1", "true")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "Permission denied (publickey)") {
			t.Errorf("OpenSSH with an unknown key: %v, %q; want Permission denied (publickey)", err, stderr.String())
		}
	} else {
		t.Log("OpenSSH ssh not installed: only the Go client was used")
	}

	// A key never registered is refused; attached, it gets in; detached,
	// it is refused again.
	if c, err := sshDial(directAddr, b); err == nil {
		c.Close()
		t.Fatal("an unknown key got in")
	}
	if err := e.c.AttachSSHKey(ctx, id, b.line); err != nil {
		t.Fatal(err)
	}
	if got := sshRun(t, directAddr, b, "echo $CONTAINER_ID"); got != fmt.Sprintf("%d\n", id) {
		t.Errorf("attached key: %q", got)
	}
	keys, err := e.c.InstanceSSHKeys(ctx, id)
	if err != nil || len(keys) != 2 {
		t.Fatalf("instance keys %+v, %v; want 2", keys, err)
	}
	if err := e.c.DetachSSHKey(ctx, id, keys[1].ID); err != nil {
		t.Fatal(err)
	}
	if c, err := sshDial(directAddr, b); err == nil {
		c.Close()
		t.Fatal("a detached key still gets in")
	}
	if c, err := sshDial(directAddr, b); err == nil {
		c.Close()
	}
	if ok, err := keyOn(e, other, b.line); err != nil || ok {
		t.Errorf("the key attached to %d reached %d (%v)", id, other, err)
	}

	// A session's process dies with a stop, and the ports stop answering.
	sess, err := sshDial(directAddr, a)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := sess.NewSession()
	if err := s.Start("echo $$ > sleeper.pid; exec sleep 600"); err != nil {
		t.Fatal(err)
	}
	var pid, opid int
	eventually(t, "session started", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "sleeper.pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	// The same through OpenSSH: its remote process dies too, and the
	// client sees its connection end.
	ossh := openSSH(a, directAddr, "echo $$ > ossh.pid; exec sleep 600")
	osshDone := make(chan error, 1)
	if ossh != nil {
		if err := ossh.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { osshDone <- ossh.Wait() }()
		eventually(t, "OpenSSH session started", func() bool {
			b, _ := os.ReadFile(filepath.Join(dir, "ossh.pid"))
			opid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			return opid > 0
		})
	}
	if err := e.c.StopInstance(ctx, id); err != nil {
		t.Fatal(err)
	}
	e.runUntil(t, id, provider.StateStopped)
	eventually(t, "session process killed by stop", func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) })
	if ossh != nil {
		eventually(t, "OpenSSH session's process killed by stop", func() bool { return errors.Is(syscall.Kill(opid, 0), syscall.ESRCH) })
		select {
		case err := <-osshDone:
			if err == nil {
				t.Error("OpenSSH reported success for a session killed by stop")
			}
		case <-time.After(30 * time.Second):
			ossh.Process.Kill()
			t.Error("OpenSSH client still connected 30 s after stop")
		}
	}
	for _, addr := range []string{directAddr, proxyAddr} {
		if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			c.Close()
			t.Errorf("%s still answers after stop", addr)
		}
	}
	sess.Close()

	// execute and logs work on a stopped instance.
	if got := execute(t, e, id, "ls"); !strings.Contains(got, "hasbooted") || !strings.Contains(got, "onstart.sh") {
		t.Errorf("execute ls on a stopped instance: %q", got)
	}
	if got := execute(t, e, id, "ls /etc"); !strings.Contains(got, "outside the instance") {
		t.Errorf("execute ls /etc: %q, want a refusal", got)
	}
	if got := execute(t, e, id, "cat /etc/passwd"); !strings.Contains(got, "not allowed") {
		t.Errorf("execute cat: %q, want a refusal", got)
	}

	// Start: onstart runs again, and the hasbooted guard shows it.
	if err := e.c.StartInstance(ctx, id); err != nil {
		t.Fatal(err)
	}
	in = e.runUntil(t, id, provider.StateRunning)
	eventually(t, "onstart ran again", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "boots"))
		return string(b) == "first\nagain\n"
	})
	if c := openSSH(a, net.JoinHostPort(in.PublicIPAddr, in.Ports["22/tcp"][0].HostPort), "cat boots; ls hasbooted"); c != nil {
		if out, err := c.Output(); err != nil || string(out) != "first\nagain\nhasbooted\n" {
			t.Errorf("OpenSSH after restart: %q, %v", out, err)
		}
	}
	logs, err := e.c.InstanceLogs(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("onstart %d hello C.%d 127.0.0.1", id, id)
	if n := strings.Count(logs, line); n != 2 {
		t.Errorf("container log holds %q %d times, want 2:\n%s", line, n, logs)
	}
	assertLoopback(t, in)

	// From inside the instance, with nothing but its environment, its own
	// key is refused on another instance (this test binary, run in an SSH
	// session as a dead-man switch would run there).
	host, port, _ := provider.SSHAddr(in)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	inside := sshRun(t, net.JoinHostPort(host, strconv.Itoa(port)), a,
		fmt.Sprintf("VASTFLEET_INSIDE_OTHER=%d %s -test.run='^TestInsideInstance$' -test.v 2>&1 || true", other, self))
	if !strings.Contains(inside, fmt.Sprintf("destroy %d: refused", other)) {
		t.Errorf("inside the instance:\n%s", inside)
	}

	// The instance's own key: read and destroy itself, nothing else.
	apiKey := readEnv(t, e, in, a, "CONTAINER_API_KEY")
	own := e.client(t, apiKey)
	if got, err := own.ShowInstance(ctx, id); err != nil || got.ID != id {
		t.Fatalf("instance key reading its instance: %v", err)
	}
	for name, call := range map[string]func() error{
		"show another":    func() error { _, err := own.ShowInstance(ctx, other); return err },
		"destroy another": func() error { return own.DestroyInstance(ctx, other) },
		"list":            func() error { _, err := own.ListInstances(ctx); return err },
		"search":          func() error { _, err := own.SearchOffers(ctx, providertest.SearchQuery(10)); return err },
		"relabel itself":  func() error { return own.SetLabel(ctx, id, "x") },
		"attach a key":    func() error { return own.AttachSSHKey(ctx, id, b.line) },
	} {
		if err := call(); !errors.Is(err, provider.ErrAuth) {
			t.Errorf("instance key, %s: %v; want ErrAuth", name, err)
		}
	}
	// The dead-man switch's move: from inside, its own key destroys its
	// own instance (the session dies with it, so its answer is not read).
	if c, err := sshDial(net.JoinHostPort(host, strconv.Itoa(port)), a); err == nil {
		s, _ := c.NewSession()
		s.Run(fmt.Sprintf("VASTFLEET_INSIDE_SELF=1 %s -test.run='^TestInsideInstance$' -test.v", self))
		c.Close()
	}
	if _, err := e.c.ShowInstance(ctx, id); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("after self-destroy: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left after destroy (%v)", dir, err)
	}
	if _, err := e.c.ShowInstance(ctx, other); err != nil {
		t.Errorf("the other instance suffered: %v", err)
	}
}

// openSSH is OpenSSH's client as a user runs it, or nil when the machine
// has none.
func openSSH(k sshKeyPair, addr, command string) *exec.Cmd {
	bin, err := exec.LookPath("ssh")
	if err != nil {
		return nil
	}
	host, port, _ := net.SplitHostPort(addr)
	return exec.Command(bin, "-p", port, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=error", "-i", k.file, "root@"+host, command)
}

// keyOn reports whether an instance accepts a key line.
func keyOn(e *simEnv, id int64, line string) (bool, error) {
	keys, err := e.c.InstanceSSHKeys(context.Background(), id)
	for _, k := range keys {
		if k.PublicKey == line {
			return true, err
		}
	}
	return false, err
}

// readEnv reads a variable from inside the instance over SSH.
func readEnv(t *testing.T, e *simEnv, in provider.Instance, k sshKeyPair, name string) string {
	t.Helper()
	host, port, _ := provider.SSHAddr(in)
	v := strings.TrimSpace(sshRun(t, net.JoinHostPort(host, strconv.Itoa(port)), k, "echo $"+name))
	if v == "" {
		t.Fatalf("$%s is empty inside instance %d", name, in.ID)
	}
	return v
}

// execute sends what `vastai execute ID CMD` sends and polls its result.
func execute(t *testing.T, e *simEnv, id int64, command string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"command": command})
	req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/api/v0/instances/command/%d/", e.srv.URL, id), bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rj struct {
		Success       bool   `json:"success"`
		ResultURL     string `json:"result_url"`
		WriteablePath string `json:"writeable_path"`
		Msg           string `json:"msg"`
	}
	b, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(b, &rj); !rj.Success {
		return string(b)
	}
	for i := 0; i < 100; i++ {
		r, err := http.Get(rj.ResultURL)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode == 200 {
			return strings.ReplaceAll(string(text), rj.WriteablePath, "")
		}
		time.Sleep(30 * time.Millisecond)
	}
	t.Fatalf("execute %q: no result", command)
	return ""
}

// TestInsideInstance runs inside a simulated instance (started there by
// TestSimulatedInstanceRunsOnLoopback): with only the instance's
// environment it destroys its own instance, or tries to destroy another,
// which must be refused.
func TestInsideInstance(t *testing.T) {
	other := os.Getenv("VASTFLEET_INSIDE_OTHER")
	if os.Getenv("CONTAINER_API_KEY") == "" || other == "" && os.Getenv("VASTFLEET_INSIDE_SELF") == "" {
		t.Skip("runs inside a simulated instance, started there by TestSimulatedInstanceRunsOnLoopback")
	}
	c, err := New(Options{BaseURL: os.Getenv("VAST_URL"), APIKey: os.Getenv("CONTAINER_API_KEY")})
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("VASTFLEET_INSIDE_SELF") != "" {
		self, _ := strconv.ParseInt(os.Getenv("CONTAINER_ID"), 10, 64)
		if err := c.DestroyInstance(context.Background(), self); err != nil {
			t.Fatal(err)
		}
		return
	}
	id, _ := strconv.ParseInt(other, 10, 64)
	err = c.DestroyInstance(context.Background(), id)
	if !errors.Is(err, provider.ErrAuth) {
		t.Fatalf("destroy %d with instance %s's key: %v", id, os.Getenv("CONTAINER_ID"), err)
	}
	fmt.Printf("destroy %d: refused (%v)\n", id, err)
}
