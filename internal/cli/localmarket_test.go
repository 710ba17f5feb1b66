package cli

import (
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/store"
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

// TestASecondTerminalSeesTheMarket: while one command holds the data
// dir (a launch in another terminal), ls reads the same local market
// live, and a second writer is refused with what works meanwhile.
func TestASecondTerminalSeesTheMarket(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	offer := e.cheapestOffer("gpu_name=RTX_3090")
	e.ok("rent", offer, "--image", "ubuntu:22.04", "--no-wait")
	held, err := store.AcquireLock(e.home, "vastfleet launch --count 300")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	r := e.ok("ls", "--json")
	if ls := decode[[]map[string]any](t, r.out); len(ls) != 1 || ls[0]["state"] != "running" || strings.Contains(r.err, "last recorded") {
		t.Errorf("ls beside a held data dir: %v, stderr %q; want the instance running, live", ls, r.err)
	}
	r = e.run("rent", e.cheapestOffer("gpu_name=RTX_4090"), "--no-wait")
	if r.code == 0 || !strings.Contains(r.err, "vastfleet launch --count 300") || !strings.Contains(r.err, "`vastfleet ls`, `cost` and ssh") {
		t.Errorf("a second writer: exit %d, stderr %q", r.code, r.err)
	}
}
