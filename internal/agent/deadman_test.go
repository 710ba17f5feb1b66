package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/bootstrap"
	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/wire"
)

const accountKey = "account-key"

// simInstance is one instance rented on a simulated market whose machines
// run for real (HostDir), and the agent environment it booted with.
type simInstance struct {
	m     *sim.Market
	clock *clock.Manual
	srv   *httptest.Server
	id    int64
	key   string            // its CONTAINER_API_KEY, from the create answer
	env   map[string]string // the onstart's environment, as the instance saw it
}

// rentOne rents the cheapest offer with the agent's variables in its env
// (as launch --coord puts them there), brings it to running, and reads the
// environment its onstart saw: CONTAINER_ID, CONTAINER_API_KEY and VAST_URL
// come from the simulator, the rest from the rental.
func rentOne(t *testing.T, agentEnv map[string]string, alsoRun ...string) *simInstance {
	t.Helper()
	s := rentWith(t, agentEnv, strings.Join(append([]string{`env > "$HOME/instance.env"`}, alsoRun...), "; "))
	envFile := filepath.Join(s.m.HostDir(s.id), "instance.env")
	eventually(t, "the onstart ran", func() bool {
		b, err := os.ReadFile(envFile)
		return err == nil && bytes.Contains(b, []byte("CONTAINER_API_KEY="))
	})
	b, _ := os.ReadFile(envFile)
	s.env = map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			s.env[k] = v
		}
	}
	if s.env[wire.EnvContainerKey] != s.key || s.env[wire.EnvVastURL] != s.srv.URL {
		t.Fatalf("instance environment: key %q url %q", s.env[wire.EnvContainerKey], s.env[wire.EnvVastURL])
	}
	return s
}

// rentWith rents the cheapest offer with this env and onstart and brings
// it to running (its machine boots and runs the onstart).
func rentWith(t *testing.T, agentEnv map[string]string, onstart string) *simInstance {
	t.Helper()
	clk := clock.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	m, err := sim.New(sim.Config{Seed: 21, Offers: 200, Clock: clk, APIKey: accountKey, HostDir: t.TempDir(), IDBase: 5000})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(func() { srv.Close(); m.Close() })
	s := &simInstance{m: m, clock: clk, srv: srv}

	var offers struct {
		Offers []struct {
			ID int64 `json:"id"`
		} `json:"offers"`
	}
	s.call(t, "POST", "/api/v0/bundles/", `{"limit":1,"rentable":{"eq":true},"order":[["dph_total","asc"]]}`, &offers)
	if len(offers.Offers) != 1 {
		t.Fatal("no offer")
	}
	env, _ := json.Marshal(agentEnv)
	var created struct {
		Success     bool   `json:"success"`
		NewContract int64  `json:"new_contract"`
		Key         string `json:"instance_api_key"`
	}
	s.call(t, "PUT", fmt.Sprintf("/api/v0/asks/%d/", offers.Offers[0].ID),
		mustJSON(t, map[string]any{"image": "alpine:3", "disk": 8, "runtype": "ssh_direc ssh_proxy", "env": json.RawMessage(env), "onstart": onstart}), &created)
	if !created.Success || created.NewContract == 0 || created.Key == "" {
		t.Fatalf("create: %+v", created)
	}
	s.id, s.key = created.NewContract, created.Key
	clk.Advance(2 * time.Hour)
	m.Sync()
	if st := s.state(t); st.Status != "running" {
		t.Fatalf("instance %d is %q after two hours", s.id, st.Status)
	}
	return s
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (s *simInstance) call(t *testing.T, method, path, body string, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+accountKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s %s: %s: %v", method, path, b, err)
	}
}

func (s *simInstance) state(t *testing.T) sim.InstanceState {
	t.Helper()
	for _, st := range s.m.State() {
		if st.ID == s.id {
			return st
		}
	}
	t.Fatalf("no instance %d in the simulator", s.id)
	return sim.InstanceState{}
}

// compute is what the ledger has charged this instance for compute.
func (s *simInstance) compute() float64 {
	total := 0.0
	for _, e := range s.m.Ledger() {
		if e.InstanceID == s.id && e.Kind == "compute" {
			total += e.Amount
		}
	}
	return total
}

// agentConfig is FromEnv over the instance's own environment, with the
// state directory in its /root.
func (s *simInstance) agentConfig(t *testing.T) Config {
	t.Helper()
	cfg, err := FromEnv(func(k string) string { return s.env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StateDir != filepath.Join(s.m.HostDir(s.id), ".vastfleet") {
		t.Fatalf("state dir %s", cfg.StateDir)
	}
	cfg.FirstJitter = -1
	cfg.StopGrace = 2 * time.Second
	cfg.retryBase = 10 * time.Millisecond
	return cfg
}

// TestDeadmanStopsItsInstance: the coordinator acknowledges a few
// heartbeats and goes away; 4 market hours later (4.8 s of the agent's
// clock at 3000x) the agent stops its own instance with its own key, says
// why in agent.log, and the simulator bills no more compute for it. With
// the destroy policy the instance is destroyed.
func TestDeadmanStopsItsInstance(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{wire.PolicyStop, wire.PolicyDestroy} {
		t.Run(policy, func(t *testing.T) {
			c := newFakeCoord(t, false)
			c.reply = wire.HeartbeatReply{IntervalS: 60} // market seconds: 20 ms at 3000x
			s := rentOne(t, map[string]string{
				wire.EnvCoordURL: c.srv.URL,
				wire.EnvFleet:    "f1",
				wire.EnvToken:    testToken,
				// 4.8 s of wall time: long enough that a busy machine's
				// slow heartbeats never trip it before the cut.
				wire.EnvOrphanAfter:  "4h",
				wire.EnvOrphanPolicy: policy,
				wire.EnvTimeScale:    "3000",
				wire.EnvSessions:     `[{"name":"work","command":"exec sleep 1000"}]`,
			})
			cfg := s.agentConfig(t)
			if cfg.Node != fmt.Sprintf("C.%d", s.id) || cfg.InstanceID != s.id || cfg.wall(cfg.OrphanAfter) != 4800*time.Millisecond {
				t.Fatalf("config from the instance: %+v", cfg)
			}
			s.clock.Advance(time.Hour)
			before := s.compute()
			if before <= 0 {
				t.Fatal("a running instance bills no compute")
			}

			r := start(t, cfg)
			eventually(t, "heartbeats acknowledged", func() bool { _, n := c.lastHeartbeat(); return n >= 3 })
			c.srv.Close() // the coordinator goes away for good
			if err := r.wait(t); !errors.Is(err, ErrOrphaned) {
				t.Fatalf("Run: %v, want ErrOrphaned", err)
			}

			st := s.state(t)
			switch policy {
			case wire.PolicyStop:
				if st.Intended != "stopped" || st.Destroyed {
					t.Errorf("instance after the dead-man stop: %+v", st)
				}
			case wire.PolicyDestroy:
				if !st.Destroyed {
					t.Errorf("instance after the dead-man destroy: %+v", st)
				}
			}
			stoppedAt := s.compute()
			s.clock.Advance(5 * time.Hour)
			if after := s.compute(); math.Abs(after-stoppedAt) > 1e-9 {
				t.Errorf("compute billing went on after the dead-man switch: $%.4f → $%.4f", stoppedAt, after)
			}
			b, _ := os.ReadFile(filepath.Join(cfg.StateDir, "agent.log"))
			if policy == wire.PolicyStop && !strings.Contains(string(b), "dead-man switch: the coordinator has acknowledged no heartbeat") {
				t.Errorf("agent.log does not say why:\n%s", b)
			}
		})
	}
}

// TestShortCutChangesNothing: the coordinator refuses heartbeats for a
// while, far shorter than orphan-after, then answers again: the agent
// goes on and the instance keeps running.
func TestShortCutChangesNothing(t *testing.T) {
	t.Parallel()
	c := newFakeCoord(t, false)
	c.reply = wire.HeartbeatReply{IntervalS: 1} // 16 ms at 60x
	s := rentOne(t, map[string]string{
		wire.EnvCoordURL:    c.srv.URL,
		wire.EnvFleet:       "f1",
		wire.EnvToken:       testToken,
		wire.EnvOrphanAfter: "30m", // 30 s of the agent's clock at 60x
		wire.EnvTimeScale:   "60",
	})
	r := start(t, s.agentConfig(t))
	eventually(t, "heartbeats acknowledged", func() bool { _, n := c.lastHeartbeat(); return n >= 2 })
	c.set(func(c *fakeCoord) { c.down = true })
	refusedFrom := time.Now()
	eventually(t, "several heartbeats refused", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.refused >= 5
	})
	c.set(func(c *fakeCoord) { c.down = false })
	cut := time.Since(refusedFrom)
	_, n := c.lastHeartbeat()
	eventually(t, "heartbeats acknowledged again", func() bool { _, m := c.lastHeartbeat(); return m >= n+3 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st := s.state(t); st.Status != "running" || st.Intended != "running" {
		t.Errorf("after a %s cut the instance is %+v", cut, st)
	}
}

// TestInstalledAgentInASimulatedInstance is the whole path: the onstart
// that launch writes (package bootstrap) downloads the built agent from
// the coordinator with its digest checked and starts it inside the
// simulated instance, with the environment the simulator gives every
// container. Its session's finding and metric arrive; then the
// coordinator goes away, the agent stops its own instance, the simulator
// stops the machine (the agent with it) and bills no more compute.
func TestInstalledAgentInASimulatedInstance(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the agent binary")
	}
	for _, tool := range []string{"curl", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the onstart needs %s", tool)
		}
	}
	bin, err := os.ReadFile(buildAgent(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	c := newFakeCoord(t, false)
	c.binary = bin
	c.reply = wire.HeartbeatReply{IntervalS: 60} // 20 ms at 3000x
	onstart, err := bootstrap.AgentOnstart("", bootstrap.Agent{
		CoordURL: c.srv.URL, Fleet: "f1", Token: testToken, BinarySHA256: hex.EncodeToString(sum[:]),
		Sessions: []wire.Session{{Name: "work",
			Command: `echo '{"metric":"keys_per_s","value":7}'; echo '{"found":{"key":"k1"}}'; exec sleep 1000`}},
		// 4.8 s of wall time, so a busy machine's slow start never trips it.
		OrphanAfter: 4 * time.Hour, OrphanPolicy: wire.PolicyStop, TimeScale: 3000,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rentWith(t, nil, onstart)
	node := fmt.Sprintf("C.%d", s.id)
	eventually(t, "the installed agent's finding stored", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, f := range c.stored {
			if f.Node == node && string(f.Data) == `{"key":"k1"}` {
				return true
			}
		}
		return false
	})
	eventually(t, "its heartbeat with the metric", func() bool {
		hb, _ := c.lastHeartbeat()
		return hb.Node == node && hb.InstanceID == s.id && hb.Metrics["keys_per_s"] == 7
	})

	c.srv.Close()
	eventually(t, "the instance stopped by its own agent", func() bool { return s.state(t).Intended == "stopped" })
	s.m.Sync() // the machine stops: the agent and its session end with it
	stopped := s.compute()
	s.clock.Advance(5 * time.Hour)
	if after := s.compute(); math.Abs(after-stopped) > 1e-9 {
		t.Errorf("compute billing went on after the dead-man switch: $%.4f → $%.4f", stopped, after)
	}
	log, _ := os.ReadFile(filepath.Join(s.m.HostDir(s.id), ".vastfleet", "agent.log"))
	// The stop ends the machine, the agent with it, possibly before the
	// answer reaches it: the reason is written before the call.
	if !strings.Contains(string(log), "dead-man switch: the coordinator has acknowledged no heartbeat") {
		t.Errorf("agent.log:\n%s", log)
	}
}

// TestMaxLifetimeStopsItsInstance: with its coordinator alive and
// acknowledging every heartbeat, the agent stops its own instance at its
// maximum lifetime (3 market hours: 3.6 s at 3000x), counted from the
// instance's first run as its state directory keeps it, and an agent
// started again past the lifetime stops the instance again.
func TestMaxLifetimeStopsItsInstance(t *testing.T) {
	t.Parallel()
	c := newFakeCoord(t, false)
	c.reply = wire.HeartbeatReply{IntervalS: 60}
	s := rentOne(t, map[string]string{
		wire.EnvCoordURL:    c.srv.URL,
		wire.EnvFleet:       "f1",
		wire.EnvToken:       testToken,
		wire.EnvMaxLifetime: "3h",
		wire.EnvTimeScale:   "3000",
		wire.EnvSessions:    `[{"name":"work","command":"exec sleep 1000"}]`,
	})
	cfg := s.agentConfig(t)
	if cfg.MaxLifetime != 3*time.Hour {
		t.Fatalf("max lifetime from the environment: %v", cfg.MaxLifetime)
	}
	// The instance first ran 2 wall seconds ago (100 market minutes).
	first := time.Now().Add(-2 * time.Second)
	os.MkdirAll(cfg.StateDir, 0o700)
	os.WriteFile(filepath.Join(cfg.StateDir, firstRunFile), []byte(first.UTC().Format(time.RFC3339Nano)+"\n"), 0o600)
	r := start(t, cfg)
	if err := r.wait(t); !errors.Is(err, ErrLifetime) {
		t.Fatalf("Run: %v, want ErrLifetime", err)
	}
	// Counted from the first run the state directory keeps, not from
	// this start (timings are not checked: this machine may be busy).
	if b, _ := os.ReadFile(filepath.Join(cfg.StateDir, firstRunFile)); strings.TrimSpace(string(b)) != first.UTC().Format(time.RFC3339Nano) {
		t.Errorf("the first run's time became %q", b)
	}
	if _, n := c.lastHeartbeat(); n < 2 {
		t.Errorf("%d heartbeats acknowledged: the coordinator was meant to be alive throughout", n)
	}
	if st := s.state(t); st.Intended != "stopped" || st.Destroyed {
		t.Errorf("instance at its max lifetime: %+v", st)
	}
	b, _ := os.ReadFile(filepath.Join(cfg.StateDir, "agent.log"))
	if !strings.Contains(string(b), "max lifetime reached") {
		t.Errorf("agent.log does not say why:\n%s", b)
	}
	// Started again past its lifetime: it stops the instance again.
	if err := start(t, cfg).wait(t); !errors.Is(err, ErrLifetime) {
		t.Errorf("an agent started past the lifetime: %v", err)
	}
}

// TestIdleStopsItsInstance: the idle rung (idle_after 1 market hour, 1.2 s
// of the agent's clock at 3000x). A machine whose only process spins is
// not idle and keeps running for three windows; one with nothing running
// is stopped by its agent, which says why. The use is the machine's own,
// from the cgroup directory its environment names (the simulator's
// cpu.stat), not this computer's.
func TestIdleStopsItsInstance(t *testing.T) {
	t.Parallel()
	env := func(c *fakeCoord) map[string]string {
		return map[string]string{
			wire.EnvCoordURL:  c.srv.URL,
			wire.EnvFleet:     "f1",
			wire.EnvToken:     testToken,
			wire.EnvIdleAfter: "1h",
			// Below half a percent of the machine's cores: one spinning
			// thread on a busy computer is well above it on any offer.
			wire.EnvIdleBelow: "0.5",
			wire.EnvTimeScale: "3000",
			wire.EnvSessions:  `[{"name":"work","command":"exec sleep 1000"}]`,
		}
	}
	t.Run("busy", func(t *testing.T) {
		t.Parallel()
		c := newFakeCoord(t, false)
		c.reply = wire.HeartbeatReply{IntervalS: 60}
		s := rentOne(t, env(c), "(while :; do :; done) &")
		cfg := s.agentConfig(t)
		if cfg.IdleAfter != time.Hour || cfg.IdleBelow != 0.5 || !strings.HasSuffix(cfg.Cgroup, "cgroup") {
			t.Fatalf("idle rung from the environment: %v below %v%%, cgroup %q", cfg.IdleAfter, cfg.IdleBelow, cfg.Cgroup)
		}
		r := start(t, cfg)
		time.Sleep(3 * cfg.wall(cfg.IdleAfter))
		if st := s.state(t); st.Intended != "running" {
			t.Fatalf("a machine spinning a thread was stopped as idle: %+v", st)
		}
		r.cancel()
		if err := r.wait(t); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		c := newFakeCoord(t, false)
		c.reply = wire.HeartbeatReply{IntervalS: 60}
		s := rentOne(t, env(c))
		cfg := s.agentConfig(t)
		if err := start(t, cfg).wait(t); !errors.Is(err, ErrIdle) {
			t.Fatalf("Run: %v, want ErrIdle", err)
		}
		if st := s.state(t); st.Intended != "stopped" || st.Destroyed {
			t.Errorf("instance idle past its idle time: %+v", st)
		}
		b, _ := os.ReadFile(filepath.Join(cfg.StateDir, "agent.log"))
		if !strings.Contains(string(b), "idle: stopping this instance") {
			t.Errorf("agent.log does not say why:\n%s", b)
		}
	})
}
