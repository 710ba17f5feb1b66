package cli

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/localmarket"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// TestLocalMarketSaysWhatItRuns: the command that starts the local
// market says so, with its seed and faults; a later command asking for
// other settings is told they are not applied and how to apply them,
// instead of running on the old market without a word; after sim stop
// the next command starts it with the new settings.
func TestLocalMarketSaysWhatItRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.ok("search", "--limit", "1")
	if !strings.Contains(r.err, "started the local simulated marketplace (seed 1, faults none") {
		t.Fatalf("the first command's stderr does not say it started the market: %q", r.err)
	}
	r = e.ok("search", "--limit", "1")
	if strings.Contains(r.err, "started") || strings.Contains(r.err, "warning") {
		t.Errorf("a second command with the same settings says %q", r.err)
	}
	r = e.ok("--sim-faults", "harsh", "--sim-seed", "7", "search", "--limit", "1")
	for _, want := range []string{"does not apply", "--sim-seed 7 (it has seed 1)", "--sim-faults harsh (it has none)", "vastfleet sim stop"} {
		if !strings.Contains(r.err, want) {
			t.Errorf("asking a running market for other settings: stderr %q lacks %q", r.err, want)
		}
	}
	e.ok("sim", "stop")
	r = e.ok("--sim-faults", "harsh", "--sim-seed", "7", "search", "--limit", "1")
	if !strings.Contains(r.err, "(seed 1, faults harsh") || !strings.Contains(r.err, "--sim-seed 7 is not applied: the saved market keeps its seed 1") {
		t.Errorf("after sim stop: stderr %q, want faults harsh applied and the kept seed named", r.err)
	}
}

// TestLocalMarketHasItsOwnKey: the local market, which lives on loopback
// between commands and runs commands on its machines as this user,
// refuses the simulator's well-known key; its own key is in a 0600 file
// of the data dir, which the commands read.
func TestLocalMarketHasItsOwnKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("search", "--limit", "1")
	dir := filepath.Join(e.home, "sim")
	u, ok := localmarket.Served(context.Background(), dir)
	if !ok {
		t.Fatal("no local market after a command")
	}
	key, err := localmarket.Key(dir)
	if err != nil || key == "" || key == sim.DefaultAPIKey {
		t.Fatalf("local market key %q, %v", key, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, localmarket.KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	for _, c := range []struct {
		key  string
		want int
	}{{sim.DefaultAPIKey, http.StatusUnauthorized}, {"", http.StatusUnauthorized}, {key, http.StatusOK}} {
		req, _ := http.NewRequest("GET", u+"/api/v1/instances/", nil)
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("key %q: HTTP %d, want %d", c.key, resp.StatusCode, c.want)
		}
	}
}
