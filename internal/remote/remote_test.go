package remote

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gssh "github.com/gliderlabs/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/sim/host"
)

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testServer is a real SSH server on loopback that runs commands with sh.
type testServer struct {
	addr     *net.TCPAddr
	hostKey  ssh.Signer
	conns    atomic.Int64
	inFlight atomic.Int64
	maxLive  atomic.Int64

	liveMu sync.Mutex
	live   []net.Conn
}

// dropAll cuts every connection the server holds, as a network cut would.
func (ts *testServer) dropAll() {
	ts.liveMu.Lock()
	defer ts.liveMu.Unlock()
	for _, c := range ts.live {
		c.Close()
	}
	ts.live = nil
}

func startServer(t *testing.T, ln net.Listener, allowed ssh.PublicKey) *testServer {
	t.Helper()
	ts := &testServer{addr: ln.Addr().(*net.TCPAddr), hostKey: newSigner(t)}
	srv := &gssh.Server{
		Handler: func(s gssh.Session) {
			n := ts.inFlight.Add(1)
			for {
				m := ts.maxLive.Load()
				if n <= m || ts.maxLive.CompareAndSwap(m, n) {
					break
				}
			}
			cmd := exec.Command("/bin/sh", "-c", s.RawCommand())
			// Output is written before the exit status, in order.
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			s.Write(out.Bytes())
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			// Counted out before the exit status goes: once the client
			// has it, it may open the next session at once.
			ts.inFlight.Add(-1)
			s.Exit(code)
		},
		PublicKeyHandler: func(_ gssh.Context, key gssh.PublicKey) bool {
			return bytes.Equal(key.Marshal(), allowed.Marshal())
		},
		ConnCallback: func(_ gssh.Context, c net.Conn) net.Conn {
			ts.conns.Add(1)
			ts.liveMu.Lock()
			ts.live = append(ts.live, c)
			ts.liveMu.Unlock()
			return c
		},
	}
	(&host.Forwards{}).Install(srv)
	srv.AddHostKey(ts.hostKey)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ts
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func target(ts *testServer, key ssh.Signer, name string) Target {
	return Target{Name: name, Host: "127.0.0.1", Port: ts.addr.Port, User: "root", Signer: key}
}

func TestRunOutputAndExitStatus(t *testing.T) {
	t.Parallel()
	key := newSigner(t)
	ts := startServer(t, listen(t), key.PublicKey())
	p := NewPool(Options{})
	defer p.Close()
	c, err := p.Connect(t.Context(), target(ts, key, "n0"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code, err := c.Run(t.Context(), WithEnv(map[string]string{"GREETING": "it's here"}, `echo "$GREETING"; exit 3`), nil, &out, &out)
	if err != nil || code != 3 || out.String() != "it's here\n" {
		t.Fatalf("code %d err %v out %q; want 3, nil, %q", code, err, out.String(), "it's here\n")
	}
}

func TestRefusedPortIsRetriedUntilTheNodeListens(t *testing.T) {
	t.Parallel()
	key := newSigner(t)
	ln := listen(t)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // refused until the "boot" below finishes
	booted := make(chan *testServer, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		ln2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			booted <- nil
			return
		}
		booted <- startServer(t, ln2, key.PublicKey())
	}()
	p := NewPool(Options{RetryBackoff: 100 * time.Millisecond, RefusedRetries: 8})
	defer p.Close()
	c, err := p.Connect(t.Context(), Target{Name: "late", Host: "127.0.0.1", Port: port, User: "root", Signer: key})
	if <-booted == nil {
		t.Skip("port taken meanwhile")
	}
	if err != nil {
		t.Fatalf("connect after refusals: %v", err)
	}
	if code, err := c.Run(t.Context(), "true", nil, nil, nil); code != 0 || err != nil {
		t.Fatalf("run: %d %v", code, err)
	}

	// Without retries the same refusal is reported as a node still starting.
	ln3 := listen(t)
	dead := ln3.Addr().(*net.TCPAddr).Port
	ln3.Close()
	_, err = NewPool(Options{RefusedRetries: -1}).Connect(t.Context(), Target{Name: "dead", Host: "127.0.0.1", Port: dead, User: "root", Signer: key})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "may still be starting") {
		t.Fatalf("refused port: %v", err)
	}
}

func TestHandshakeThatHangsIsCutAtTheDeadline(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	defer ln.Close()
	go func() { // accepts and never speaks, like a wedged proxy
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	p := NewPool(Options{HandshakeTimeout: 300 * time.Millisecond})
	defer p.Close()
	done := make(chan error, 1)
	go func() {
		_, err := p.Connect(t.Context(), Target{Name: "hang", Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, User: "root", Signer: newSigner(t)})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrHandshakeHang) || !strings.Contains(err.Error(), "did not finish within 300ms") {
			t.Fatalf("hang: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a hanging handshake was not cut")
	}
}

func TestWrongKeyNamesTheKeyOffered(t *testing.T) {
	t.Parallel()
	good, bad := newSigner(t), newSigner(t)
	ts := startServer(t, listen(t), good.PublicKey())
	p := NewPool(Options{})
	defer p.Close()
	_, err := p.Connect(t.Context(), target(ts, bad, "n1"))
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("want ErrAuth, got %v", err)
	}
	for _, want := range []string{Fingerprint(bad.PublicKey()), "not on the instance", "attach"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestHostKeyAcceptNewThenChangedKeyRefused(t *testing.T) {
	t.Parallel()
	key := newSigner(t)
	ts := startServer(t, listen(t), key.PublicKey())
	var learned ssh.PublicKey
	p := NewPool(Options{OnNewHostKey: func(_ Target, k ssh.PublicKey) error { learned = k; return nil }})
	if _, err := p.Connect(t.Context(), target(ts, key, "n2")); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if learned == nil || !bytes.Equal(learned.Marshal(), ts.hostKey.PublicKey().Marshal()) {
		t.Fatal("the presented host key was not reported")
	}
	tg := target(ts, key, "n2")
	tg.HostKey = learned
	if _, err := NewPool(Options{}).Connect(t.Context(), tg); err != nil {
		t.Fatalf("known key: %v", err)
	}
	tg.HostKey = newSigner(t).PublicKey()
	_, err := NewPool(Options{}).Connect(t.Context(), tg)
	if !errors.Is(err, ErrHostKeyChanged) || !strings.Contains(err.Error(), Fingerprint(learned)) {
		t.Fatalf("changed key: %v", err)
	}
}

func TestOneConnectionPerNodeAndBoundedSessions(t *testing.T) {
	t.Parallel()
	key := newSigner(t)
	ts := startServer(t, listen(t), key.PublicKey())
	p := NewPool(Options{MaxSessions: 2})
	defer p.Close()
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := p.Connect(t.Context(), target(ts, key, "n3"))
			if err != nil {
				t.Error(err)
				return
			}
			if code, err := c.Run(t.Context(), "sleep 0.2", nil, nil, nil); code != 0 || err != nil {
				t.Errorf("run: %d %v", code, err)
			}
		}()
	}
	wg.Wait()
	if n := ts.conns.Load(); n != 1 {
		t.Errorf("%d TCP connections to one node, want 1", n)
	}
	if m := ts.maxLive.Load(); m > 2 {
		t.Errorf("%d sessions at once, want at most 2", m)
	}
}

func TestRunAllFiftyNodesOneFails(t *testing.T) {
	t.Parallel()
	key := newSigner(t)
	var jobs []Job
	outs := make([]*bytes.Buffer, 50)
	for i := range 50 {
		ts := startServer(t, listen(t), key.PublicKey())
		outs[i] = &bytes.Buffer{}
		env := map[string]string{"RANK": fmt.Sprint(i)}
		jobs = append(jobs, Job{Target: target(ts, key, fmt.Sprintf("node-%d", i)),
			Cmd: WithEnv(env, `echo rank=$RANK; [ "$RANK" != 17 ] || exit 7`), Stdout: outs[i], Stderr: outs[i]})
	}
	p := NewPool(Options{MaxHandshakes: 8, Jitter: 20 * time.Millisecond})
	defer p.Close()
	res := p.RunAll(t.Context(), jobs, 16)
	for i, r := range res {
		want := 0
		if i == 17 {
			want = 7
		}
		if r.Err != nil || r.Exit != want || r.OK() != (want == 0) {
			t.Errorf("node %d: exit %d err %v, want %d", i, r.Exit, r.Err, want)
		}
		if outs[i].String() != fmt.Sprintf("rank=%d\n", i) {
			t.Errorf("node %d output %q", i, outs[i])
		}
	}
}

func TestCancelStopsARunningCommand(t *testing.T) {
	t.Parallel()
	key := newSigner(t)
	ts := startServer(t, listen(t), key.PublicKey())
	p := NewPool(Options{})
	defer p.Close()
	c, err := p.Connect(t.Context(), target(ts, key, "n4"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Run(ctx, "sleep 30", nil, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 20*time.Second {
		t.Fatalf("cancel: %v after %s", err, time.Since(start))
	}
}

// A key refused for the first seconds after an instance runs (vast.ai:
// "if authentication fails, try again after a few seconds") is retried;
// with AuthRetries -1 the refusal is reported at once.
func TestKeyRefusedAtFirstIsRetried(t *testing.T) {
	t.Parallel()
	key := newSigner(t)
	var attempts atomic.Int32
	ln := listen(t)
	srv := &gssh.Server{
		Handler: func(s gssh.Session) { s.Exit(0) },
		PublicKeyHandler: func(_ gssh.Context, k gssh.PublicKey) bool {
			// Each connection offers the key once; the first two are refused.
			return attempts.Add(1) > 2 && bytes.Equal(k.Marshal(), key.PublicKey().Marshal())
		},
	}
	srv.AddHostKey(newSigner(t))
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	target := Target{Name: "late-key", Host: "127.0.0.1", Port: port, User: "root", Signer: key}

	_, err := NewPool(Options{AuthRetries: -1}).Connect(t.Context(), target)
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("without retries: %v, want ErrAuth", err)
	}
	p := NewPool(Options{RetryBackoff: 20 * time.Millisecond})
	defer p.Close()
	c, err := p.Connect(t.Context(), target)
	if err != nil {
		t.Fatalf("with retries: %v (after %d attempts)", err, attempts.Load())
	}
	if code, err := c.Run(t.Context(), "true", nil, nil, nil); code != 0 || err != nil {
		t.Fatalf("run: %d %v", code, err)
	}
}
