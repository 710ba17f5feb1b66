package remote

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// home is a service on "this machine" that nodes reach only through the
// tunnel, and a dialer for it.
func home(t *testing.T) func(ctx context.Context) (net.Conn, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "home says %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// get fetches path through the node's end of the tunnel.
func get(t *testing.T, addr, path string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET through the tunnel: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitUp(t *testing.T, ups <-chan net.Addr) net.Addr {
	t.Helper()
	select {
	case a := <-ups:
		return a
	case <-time.After(20 * time.Second):
		t.Fatal("the tunnel did not come up")
		return nil
	}
}

func TestKeepForwardCarriesConnectionsAndReconnectsAfterADrop(t *testing.T) {
	t.Parallel()
	key := newSigner(t)
	ts := startServer(t, listen(t), key.PublicKey())
	// A port on the node that the tunnel binds again after each reconnect,
	// so the agent's URL never changes.
	free := listen(t)
	nodeAddr := free.Addr().String()
	free.Close()

	p := NewPool(Options{RetryBackoff: 10 * time.Millisecond})
	defer p.Close()
	ups, downs := make(chan net.Addr, 4), make(chan error, 4)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- p.KeepForward(ctx, Tunnel{
			Target: target(ts, key, "n0"), RemoteAddr: nodeAddr, Dial: home(t),
			OnUp: func(a net.Addr) { ups <- a }, OnDown: func(err error) { downs <- err },
		})
	}()
	if a := waitUp(t, ups); a.String() != nodeAddr {
		t.Fatalf("the node bound %s, want %s", a, nodeAddr)
	}
	if got := get(t, nodeAddr, "/first"); got != "home says /first" {
		t.Fatalf("through the tunnel: %q", got)
	}

	ts.dropAll()
	select {
	case err := <-downs:
		if err == nil {
			t.Fatal("the tunnel went down without a reason")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the drop was not noticed")
	}
	waitUp(t, ups)
	if got := get(t, nodeAddr, "/again"); got != "home says /again" {
		t.Fatalf("after the reconnect: %q", got)
	}
	if n := ts.conns.Load(); n != 2 {
		t.Fatalf("%d SSH connections, want 2 (one, then one after the drop)", n)
	}

	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("KeepForward returned %v, want context.Canceled", err)
	}
	// The node's listener goes with the tunnel.
	if c, err := net.DialTimeout("tcp", nodeAddr, time.Second); err == nil {
		c.Close()
		// The server closes it once it sees the cancel; give it a moment.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if c, err = net.DialTimeout("tcp", nodeAddr, time.Second); err != nil {
				break
			}
			c.Close()
			time.Sleep(20 * time.Millisecond)
		}
		if err == nil {
			t.Fatal("the node still listens after the tunnel ended")
		}
	}
}

func TestForwardOnPortZeroReportsThePortTheNodePicked(t *testing.T) {
	t.Parallel()
	key := newSigner(t)
	ts := startServer(t, listen(t), key.PublicKey())
	p := NewPool(Options{})
	defer p.Close()
	c, err := p.Connect(t.Context(), target(ts, key, "n0"))
	if err != nil {
		t.Fatal(err)
	}
	ups := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go c.Forward(ctx, "127.0.0.1:0", home(t), func(a net.Addr) { ups <- a })
	a := waitUp(t, ups)
	if a.(*net.TCPAddr).Port == 0 {
		t.Fatal("no port reported")
	}
	if got := get(t, a.String(), "/x"); got != "home says /x" {
		t.Fatalf("through the tunnel: %q", got)
	}
}

func TestForwardOffLoopbackIsRefused(t *testing.T) {
	t.Parallel()
	key := newSigner(t)
	ts := startServer(t, listen(t), key.PublicKey())
	p := NewPool(Options{})
	defer p.Close()
	c, err := p.Connect(t.Context(), target(ts, key, "n0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Forward(t.Context(), "0.0.0.0:0", home(t), nil); err == nil {
		t.Fatal("a forward on every interface of the node was allowed")
	}
	// The connection still serves commands.
	if code, err := c.Run(t.Context(), "true", nil, nil, nil); code != 0 || err != nil {
		t.Fatalf("run after the refusal: %d %v", code, err)
	}
}
