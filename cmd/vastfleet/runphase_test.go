package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
)

// These tests run the run phase as a user would, each part its own
// process: a simulated marketplace (`sim serve`, whose machines outlive
// any other process), a coordinator, a launch whose instances run the real
// agent.

type proc struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out bytes.Buffer
}

func (p *proc) Write(b []byte) (int, error) { p.mu.Lock(); defer p.mu.Unlock(); return p.out.Write(b) }
func (p *proc) String() string              { p.mu.Lock(); defer p.mu.Unlock(); return p.out.String() }

func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...)}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			p.cmd.Process.Kill()
		}
	})
	return p
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func eventually(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

func getJSON(url, token string, out any) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// runPhase is a sim serve, a coordinator on coordAddr and a launch of n
// instances running session.
type runPhase struct {
	t                         *testing.T
	bin, dir, simURL, coordAt string
	fleet                     string
}

func newRunPhase(t *testing.T, timeScale string) *runPhase {
	for _, tool := range []string{"curl", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the agent's onstart needs %s", tool)
		}
	}
	r := &runPhase{t: t, bin: binary(t), dir: t.TempDir(), fleet: "rp"}
	simAddr := freeAddr(t)
	r.simURL = "http://" + simAddr
	sim := start(t, r.bin, "sim", "serve", "--addr", simAddr, "--faults", "none", "--time-scale", timeScale,
		"--state", filepath.Join(r.dir, "market"))
	eventually(t, "sim serve", 30*time.Second, func() bool {
		var v map[string]any
		return getJSON(r.simURL+"/sim/clock", "", &v) == nil
	})
	_ = sim
	r.coordAt = freeAddr(t)
	return r
}

func (r *runPhase) vf(args ...string) []string {
	return append([]string{"--data-dir", r.dir, "--api-url", r.simURL}, args...)
}

func (r *runPhase) startCoord() *proc {
	p := start(r.t, r.bin, r.vf("coord", "--addr", r.coordAt, "--fleet", r.fleet)...)
	eventually(r.t, "the coordinator", 30*time.Second, func() bool { return strings.Contains(p.String(), "Ctrl+C stops it") })
	return p
}

func (r *runPhase) launch(n int, session string, extra ...string) {
	r.t.Helper()
	args := r.vf(append([]string{"launch", "--coord", "auto", "--count", fmt.Sprint(n), "--fleet", r.fleet,
		// A long deadline: against a served market the launch waits in
		// scaled wall time, and a loaded machine must not cut it short.
		"--image", "ubuntu:22.04", "--deadline", "24h", "--session", session,
		"-n", "rentable=True num_gpus=1 dph_total<1"}, extra...)...)
	out, err := exec.Command(r.bin, args...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("launch: %v\n%s", err, out)
	}
}

func (r *runPhase) viewer() string {
	b, err := os.ReadFile(filepath.Join(r.dir, "coord.db-tokens.json"))
	if err != nil {
		r.t.Fatal(err)
	}
	var tokens map[string]map[string]string
	if err := json.Unmarshal(b, &tokens); err != nil {
		r.t.Fatal(err)
	}
	return tokens[r.fleet]["viewer"]
}

type snapshot struct {
	Totals struct {
		NodesAlive int   `json:"nodes_alive"`
		Findings   int64 `json:"findings"`
	} `json:"totals"`
}

func (r *runPhase) state() (snapshot, error) {
	var s snapshot
	err := getJSON("http://"+r.coordAt+"/api/v1/state", r.viewer(), &s)
	return s, err
}

// TestCoordinatorKill9LosesNoFinding: three agents each produce 150
// findings; the coordinator is killed with SIGKILL while they flow and
// started again on the same address. Every finding ends up stored, each
// exactly once.
func TestCoordinatorKill9LosesNoFinding(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds binaries and runs several processes")
	}
	const nodes, each = 3, 150
	r := newRunPhase(t, "60")
	c := r.startCoord()
	r.launch(nodes, fmt.Sprintf(`work:for i in $(seq 1 %d); do echo "{\"found\":{\"i\":$i}}"; sleep 0.05; done; exec sleep 100000`, each))
	var atKill int64
	eventually(t, "findings flowing", 60*time.Second, func() bool {
		s, err := r.state()
		atKill = s.Totals.Findings
		return err == nil && s.Totals.Findings >= nodes*each/4
	})
	c.cmd.Process.Kill() // kill -9: no shutdown, no flush
	c.cmd.Wait()
	time.Sleep(500 * time.Millisecond) // agents find it gone and keep spooling
	r.startCoord()
	eventually(t, "every finding stored", 90*time.Second, func() bool {
		s, err := r.state()
		return err == nil && s.Totals.Findings >= nodes*each
	})
	db, err := coord.OpenDB(context.Background(), filepath.Join(r.dir, "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t.Logf("coordinator killed with %d of %d findings stored", atKill, nodes*each)
	if atKill >= nodes*each {
		t.Errorf("every finding had arrived before the kill: the test proves nothing")
	}
	fs, err := db.Findings(context.Background(), r.fleet, 10*nodes*each)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, f := range fs {
		seen[f.Node+" "+string(f.Data)]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("finding %s stored %d times", k, n)
		}
	}
	if len(fs) != nodes*each || len(seen) != nodes*each {
		t.Errorf("%d findings stored (%d distinct), want %d", len(fs), len(seen), nodes*each)
	}
}

// TestDeadmanStopsTheFleetWithoutItsCoordinator: the coordinator goes away
// for good; after --orphan-after of market time every agent stops its own
// instance, and the marketplace bills no more compute for the fleet.
func TestDeadmanStopsTheFleetWithoutItsCoordinator(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds binaries and runs several processes")
	}
	r := newRunPhase(t, "600") // 30 market minutes = 3 s
	c := r.startCoord()
	r.launch(2, `work:exec sleep 100000`, "--orphan-after", "30m")
	eventually(t, "both agents reporting", 60*time.Second, func() bool {
		s, err := r.state()
		return err == nil && s.Totals.NodesAlive == 2
	})
	c.cmd.Process.Signal(syscall.SIGTERM)
	c.cmd.Wait()

	type simState struct {
		Instances []struct {
			ID        int64  `json:"id"`
			Label     string `json:"label"`
			Status    string `json:"actual_status"`
			Intended  string `json:"intended_status"`
			Destroyed bool   `json:"destroyed"`
		} `json:"instances"`
	}
	fleetStates := func() map[int64]string {
		var st simState
		if err := getJSON(r.simURL+"/sim/state", "", &st); err != nil {
			t.Fatal(err)
		}
		out := map[int64]string{}
		for _, in := range st.Instances {
			// A surplus node the launch destroyed is no longer the fleet's.
			if strings.Contains(in.Label, ":"+r.fleet+":") && !in.Destroyed {
				out[in.ID] = in.Intended
			}
		}
		return out
	}
	eventually(t, "every instance stopped by its own agent", 60*time.Second, func() bool {
		states := fleetStates()
		for _, s := range states {
			if s != "stopped" {
				return false
			}
		}
		return len(states) == 2
	})
	compute := func() float64 {
		var l struct {
			Entries []struct {
				InstanceID int64   `json:"instance_id"`
				Kind       string  `json:"kind"`
				Amount     float64 `json:"amount"`
			} `json:"entries"`
		}
		if err := getJSON(r.simURL+"/sim/ledger", "", &l); err != nil {
			t.Fatal(err)
		}
		ids := fleetStates()
		sum := 0.0
		for _, e := range l.Entries {
			if _, ok := ids[e.InstanceID]; ok && e.Kind == "compute" {
				sum += e.Amount
			}
		}
		return sum
	}
	before := compute()
	time.Sleep(2 * time.Second) // 20 market minutes
	if after := compute(); after > before+1e-9 {
		t.Errorf("compute billed after the dead-man stop: $%.6f then $%.6f", before, after)
	}
}
