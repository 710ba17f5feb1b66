package cli

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// snapshot asks the coordinator behind a dashboard link for the fleet's
// live view.
func snapshot(t *testing.T, link string) wire.Snapshot {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, u.Scheme+"://"+u.Host+wire.PathState, nil)
	req.Header.Set("Authorization", "Bearer "+u.Query().Get("token"))
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s wire.Snapshot
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d", wire.PathState, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAgentsReachTheCoordinatorOnlyThroughTunnels: with coord --tunnel,
// every simulated instance's agent is told a port on its own node, which
// only vastfleet's reverse tunnel over SSH serves; heartbeats and findings
// arrive, from both nodes.
func TestAgentsReachTheCoordinatorOnlyThroughTunnels(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the agent")
	}
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	base := "21000"
	out, errOut := e.startCmd("coord", "--addr", "127.0.0.1:0", "--agent-bin", agentBin, "--fleet", "tun",
		"--tunnel", "--tunnel-port-base", base)
	waitFor(t, "the coordinator", 30*time.Second, func() bool { return strings.Contains(out.String(), "tun\t") })
	link := strings.TrimSpace(strings.SplitN(strings.SplitN(out.String(), "tun\t", 2)[1], "\n", 2)[0])
	coordPort := regexp.MustCompile(`:(\d+)/`).FindStringSubmatch(link)[1]

	e.ok("launch", "--coord", "auto", "--count", "2", "--fleet", "tun", "--image", "ubuntu:22.04", "--deadline", "30m",
		"--session", `work:echo '{"found":{"key":"'$CONTAINER_ID'"}}'; while sleep 1; do echo '{"metric":"keys_per_s","value":10}'; done`,
		"-n", "rentable=True num_gpus=1 dph_total<1")

	// What each instance was told: its own tunnel port, never the
	// coordinator's.
	var onstarts []string
	filepath.WalkDir(e.home, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "onstart.sh" {
			onstarts = append(onstarts, readFile(t, p))
		}
		return nil
	})
	if len(onstarts) != 2 {
		t.Fatalf("%d onstart scripts, want 2", len(onstarts))
	}
	for _, s := range onstarts {
		if strings.Contains(s, ":"+coordPort) || !strings.Contains(s, "127.0.0.1:$(("+base+" + ${CONTAINER_ID:-0} % 10000))") {
			t.Fatalf("the onstart does not point the agent at its tunnel:\n%s", s)
		}
	}

	var snap wire.Snapshot
	deadline := time.Now().Add(90 * time.Second)
	for {
		snap = snapshot(t, link)
		if snap.Totals.NodesAlive == 2 && snap.Totals.Findings == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("through the tunnels: %d nodes alive, %d findings; want 2 and 2\ncoordinator stderr:\n%s",
				snap.Totals.NodesAlive, snap.Totals.Findings, errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, n := range snap.Nodes {
		if n.InstanceID == 0 {
			t.Fatalf("node %s reported no instance id", n.Node)
		}
	}
	if !strings.Contains(errOut.String(), "reverse tunnels") {
		t.Errorf("coord did not say it keeps tunnels:\n%s", errOut.String())
	}
}
