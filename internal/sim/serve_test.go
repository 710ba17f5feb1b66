package sim

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// countingBody is a request body that counts what the server reads of it.
type countingBody struct {
	left int64
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), b.left)
	for i := range p[:n] {
		p[i] = ' '
	}
	b.left -= n
	b.read.Add(n)
	return int(n), nil
}

func (b *countingBody) Close() error { return nil }

func TestKeyIsCheckedBeforeTheBodyIsRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 1})
	send := func(method, path, key string) (int, int64) {
		body := &countingBody{left: 4 << 20}
		req := httptest.NewRequest(method, path, nil)
		req.Body = body
		req.RemoteAddr = "192.0.2.7:5000" // a stranger, not loopback
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		h.m.Handler().ServeHTTP(rec, req)
		return rec.Code, body.read.Load()
	}
	for _, key := range []string{"", "wrong-key"} {
		code, read := send(http.MethodPut, "/api/v0/asks/1/", key)
		if code != http.StatusUnauthorized || read != 0 {
			t.Errorf("key %q: status %d after reading %d body bytes; want 401 with nothing read", key, code, read)
		}
	}
	// The account key's request is read (and refused as bad JSON).
	if code, read := send(http.MethodPut, "/api/v0/asks/1/", h.key); read == 0 || code == http.StatusUnauthorized {
		t.Errorf("account key: status %d after reading %d bytes; want the body read", code, read)
	}

	// An instance's own key: refused unread outside its scope, and within
	// it read only up to the small limit a state change needs.
	h.m.mu.Lock()
	h.m.keyOwner["instance-key"] = 42
	h.m.mu.Unlock()
	if code, read := send(http.MethodPut, "/api/v0/asks/1/", "instance-key"); code != http.StatusForbidden || read != 0 {
		t.Errorf("instance key out of scope: status %d after reading %d bytes; want 403 with nothing read", code, read)
	}
	if _, read := send(http.MethodPut, "/api/v0/instances/42/", "instance-key"); read > maxInstanceBody {
		t.Errorf("instance key in scope: read %d bytes, want at most %d", read, maxInstanceBody)
	}
}

func TestServerBoundsEveryConnectionPhase(t *testing.T) {
	t.Parallel()
	srv := newHarness(t, Config{Seed: 1}).m.server()
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout,
	} {
		if d <= 0 || d > 2*time.Minute {
			t.Errorf("%s = %v; want a bound of at most 2 minutes", name, d)
		}
	}
}
