package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
)

// TestItemsSurviveLostNodes is the work-item path on the simulator: a
// coordinator, a launch of five instances whose agents share 40 items, and
// one node (20 %) destroyed while it runs an item. The first run of item
// "0" hangs and names its node, which is the one destroyed; the item goes
// back to the queue when the node's heartbeats stop, and another node runs
// it. Every item is done exactly once, by the results table, and every
// item's finding is stored once.
func TestItemsSurviveLostNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the agent and runs five simulated instances")
	}
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120" // heartbeats every 10 market seconds: 83 ms; leases last 30: 250 ms
	out, errOut := e.startCmd("coord", "--addr", "127.0.0.1:0", "--agent-bin", agentBin, "--fleet", "work")
	waitFor(t, "the coordinator", 30*time.Second, func() bool { return strings.Contains(out.String(), "work\t") })

	if r := e.fails("launch", "--coord", "auto", "--count", "1", "--fleet", "work", "--items", "0..3",
		"--session", "w:echo no placeholder", "-n", "rentable=True"); r.code != 2 || !strings.Contains(r.err, "{item}") {
		t.Fatalf("--items without a worker session: exit %d, %s", r.code, r.err)
	}
	const items = 40
	marker := filepath.Join(t.TempDir(), "first-run-of-0")
	work := fmt.Sprintf(`printf '{"found":{"n":%%s}}\n' {item}; if [ {item} = 0 ] && mkdir %s 2>/dev/null; then echo C.$CONTAINER_ID > %s/node; sleep 600; fi; sleep 0.05; echo did {item}`, marker, marker)
	e.ok("launch", "--coord", "auto", "--count", "5", "--fleet", "work", "--image", "ubuntu:22.04", "--deadline", "30m",
		"--items", "0.."+strconv.Itoa(items-1), "--session", "work:"+work,
		"-n", "rentable=True num_gpus=1 dph_total<1")

	ctx := context.Background()
	db, err := coord.OpenDB(ctx, filepath.Join(e.home, "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Registering again (a relaunch) adds nothing.
	if err := db.AddItems(ctx, "work", []string{"0", "1", "39"}); err != nil {
		t.Fatal(err)
	}
	var holder string
	// Item 0 may even be done already, by another node that got it when
	// the hung node's lease ran out on a loaded machine; the checks below
	// hold either way (done once, not by the hung node, on a later lease).
	waitFor(t, "a node to hang on item 0", 60*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(marker, "node"))
		holder = strings.TrimSpace(string(b))
		return strings.HasPrefix(holder, "C.")
	})
	// On a loaded machine the hung node's lease may already have run out
	// (its heartbeats late) and item 0 gone to another node; the node that
	// runs the first, hung run is the one to destroy either way.
	if owner := ownerOf(t, db, "0"); owner != holder {
		t.Logf("item 0 is now leased to %q, not to the hung node %s", owner, holder)
	}
	id := strings.TrimPrefix(holder, "C.")
	e.ok("destroy", id)

	waitFor(t, "every item done", 90*time.Second, func() bool {
		_, _, done, err := db.ItemCounts(ctx, "work")
		if err != nil {
			t.Fatal(err)
		}
		return done == items
	})
	q, l, d, _ := db.ItemCounts(ctx, "work")
	if q != 0 || l != 0 || d != items {
		t.Fatalf("%d queued, %d leased, %d done; want 0, 0, %d", q, l, d, items)
	}
	res, err := db.ItemResults(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]int{}
	for _, r := range res {
		nodes[r.Node]++
		if r.ExitCode != 0 || !strings.HasSuffix(r.StdoutTail, "did "+r.Value+"\n") {
			t.Errorf("item %s: exit %d, tail %q", r.Value, r.ExitCode, r.StdoutTail)
		}
		if r.Value == "0" && (r.Node == holder || r.Attempts < 2) {
			t.Errorf("item 0: done by %s after %d leases; want another node than the destroyed %s, on a second lease", r.Node, r.Attempts, holder)
		}
	}
	if len(res) != items || nodes[holder] > 0 && len(nodes) < 2 {
		t.Errorf("%d results from nodes %v", len(res), nodes)
	}
	fs, err := db.Findings(ctx, "work", 0)
	if err != nil {
		t.Fatal(err)
	}
	perItem := map[int64]int{}
	for _, f := range fs {
		perItem[f.Item]++
	}
	if len(fs) != items || len(perItem) != items {
		t.Errorf("%d findings over %d items; want one per item (%d)\ncoordinator stderr:\n%s", len(fs), len(perItem), items, errOut.String())
	}
	e.ok("destroy", "--all", "--yes")
	if n := len(decode[[]map[string]any](t, e.ok("ls", "--json").out)); n != 0 {
		t.Errorf("%d instances left", n)
	}
	t.Logf("40 items over 5 nodes, node %s destroyed holding item 0: results per node %v", holder, nodes)
}

// ownerOf is the node holding the item with this value, or "".
func ownerOf(t *testing.T, db *coord.DB, value string) string {
	t.Helper()
	all, err := db.Items(context.Background(), "work")
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range all {
		if it.Value == value && it.State == coord.ItemLeased {
			return it.Node
		}
	}
	return ""
}
