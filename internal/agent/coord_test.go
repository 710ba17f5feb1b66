package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

const testToken = "agent-token"

// fakeCoord is a coordinator on loopback that speaks the wire paths and
// de-duplicates findings by key, as the real one does. Its failure modes
// are switched by the test.
type fakeCoord struct {
	t     testing.TB
	srv   *httptest.Server
	reply wire.HeartbeatReply

	mu         sync.Mutex
	down       bool // every request answers 503
	failFinds  int  // this many findings requests answer 500 first
	storeNoAck int  // this many findings requests are stored, then answered 500
	heartbeats []wire.Heartbeat
	stored     map[string]wire.Finding
	received   map[string]int // how often each key arrived
	badAuth    int
	refused    int    // requests answered 503 while down
	binary     []byte // served at wire.PathAgentBin
}

func newFakeCoord(t testing.TB, tls bool) *fakeCoord {
	c := &fakeCoord{t: t, stored: map[string]wire.Finding{}, received: map[string]int{},
		reply: wire.HeartbeatReply{IntervalS: 0.02}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.PathHeartbeat, c.heartbeat)
	mux.HandleFunc("POST "+wire.PathEnroll, func(w http.ResponseWriter, r *http.Request) {
		// An agent with an instance id enrolls first; the fake hands
		// back the one token it knows as the instance's credential.
		if !c.authed(w, r) {
			return
		}
		var req wire.EnrollRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, wire.MaxBody)).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
			return
		}
		writeJSON(w, wire.EnrollReply{Token: testToken, Node: req.Node})
	})
	mux.HandleFunc("POST "+wire.PathFindings, c.findings)
	mux.HandleFunc("GET "+wire.PathAgentBin, func(w http.ResponseWriter, r *http.Request) {
		if !c.authed(w, r) {
			return
		}
		c.mu.Lock()
		bin := c.binary
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(bin)
	})
	if tls {
		c.srv = httptest.NewTLSServer(mux)
	} else {
		c.srv = httptest.NewServer(mux)
	}
	t.Cleanup(c.srv.Close)
	return c
}

func (c *fakeCoord) authed(w http.ResponseWriter, r *http.Request) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		c.refused++
		http.Error(w, `{"error":"down"}`, http.StatusServiceUnavailable)
		return false
	}
	if r.Header.Get("Authorization") != "Bearer "+testToken {
		c.badAuth++
		http.Error(w, `{"error":"bad token"}`, http.StatusUnauthorized)
		return false
	}
	return true
}

func (c *fakeCoord) heartbeat(w http.ResponseWriter, r *http.Request) {
	if !c.authed(w, r) {
		return
	}
	var hb wire.Heartbeat
	if err := json.NewDecoder(io.LimitReader(r.Body, wire.MaxBody)).Decode(&hb); err != nil {
		http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.heartbeats = append(c.heartbeats, hb)
	reply := c.reply
	c.mu.Unlock()
	writeJSON(w, reply)
}

func (c *fakeCoord) findings(w http.ResponseWriter, r *http.Request) {
	if !c.authed(w, r) {
		return
	}
	var in wire.Findings
	if err := json.NewDecoder(io.LimitReader(r.Body, wire.MaxBody)).Decode(&in); err != nil {
		http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failFinds > 0 {
		c.failFinds--
		http.Error(w, `{"error":"database is locked"}`, http.StatusInternalServerError)
		return
	}
	ack := wire.FindingsAck{Acked: []string{}}
	for _, f := range in.Items {
		c.received[f.Key]++
		if _, dup := c.stored[f.Key]; dup {
			ack.Duplicates++
		} else {
			f.Node = in.Node
			c.stored[f.Key] = f
			ack.Stored++
		}
		ack.Acked = append(ack.Acked, f.Key)
	}
	if c.storeNoAck > 0 {
		// Committed, but the answer is lost: the agent must resend, and
		// the key keeps it from being stored twice.
		c.storeNoAck--
		http.Error(w, `{"error":"gateway timeout"}`, http.StatusGatewayTimeout)
		return
	}
	writeJSON(w, ack)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (c *fakeCoord) set(f func(c *fakeCoord)) {
	c.mu.Lock()
	f(c)
	c.mu.Unlock()
}

func (c *fakeCoord) lastHeartbeat() (wire.Heartbeat, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.heartbeats) == 0 {
		return wire.Heartbeat{}, 0
	}
	return c.heartbeats[len(c.heartbeats)-1], len(c.heartbeats)
}

func (c *fakeCoord) storedKeys() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for k := range c.stored {
		out[k] = true
	}
	return out
}

// testConfig is an agent on this coordinator with a fast cadence and no
// dead-man switch.
func (c *fakeCoord) testConfig(t *testing.T, dir string, sessions ...wire.Session) Config {
	return Config{
		CoordURL:    c.srv.URL,
		Fleet:       "f1",
		Node:        "C.1",
		Token:       testToken,
		Sessions:    sessions,
		StateDir:    dir,
		StopGrace:   2 * time.Second,
		FirstJitter: -1,
		restartBase: 10 * time.Millisecond,
		retryBase:   10 * time.Millisecond,
	}
}

// running is an agent started in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, cfg Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() { r.done <- Run(ctx, cfg, log) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the agent and returns what Run returned.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not stop within 30 s of its context ending")
		return nil
	}
}

// wait returns what Run returned on its own.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		close(r.done)
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("agent still running after 30 s")
		return nil
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// eventually polls cond (the agent works in the background) and fails
// with what after a generous deadline; it never asserts a duration.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// spoolKeys reads the keys in a spool file.
func spoolKeys(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "spool.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var f wire.Finding
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("spool line %q: %v", line, err)
		}
		keys = append(keys, f.Key)
	}
	return keys
}
