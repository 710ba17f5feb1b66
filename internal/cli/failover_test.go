package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/server/pgtest"
)

// TestServeFailover: two server replicas share a PostgreSQL (--db) and a
// data dir (one volume), with one coordinator address (--coord-addr) and
// a market served apart. A job runs on the replica it was submitted to;
// with its items and findings flowing, that replica is killed with
// SIGKILL. Its database sessions end with it, the other replica takes the
// job over (up --resume) and the agents come back to the coordinator at
// the same address. The job finishes with every item run and every
// finding recorded once, no instance left, and a cost equal to the
// simulator's ledger. How long the takeover took is reported, not
// asserted (a figure of this machine's load; the goal is 30 s).
func TestServeFailover(t *testing.T) {
	h := newServeHarness(t)
	dsn := pgtest.DSN(t)
	marketURL := startServedMarket(t, h.bin)
	addrA, addrB, coordAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	h.Global = append(h.Global, "--market", "sim", "--api-url", marketURL)
	h.Serve = []string{"--db", dsn, "--coord-addr", coordAddr}
	op := h.operator("--db", dsn)
	replicaA := h.start(addrA)
	urlA, urlB := "http://"+addrA, "http://"+addrB

	const items = 30
	file := itemsJob(t, "failover", 3, items, "")
	sub := decode[map[string]string](t, op.ok("--server", urlA, "up", file, "--detach", "--json").out)
	id := sub["job"]
	h.start(addrB)
	cdb, err := coord.OpenDB(context.Background(), filepath.Join(h.home, "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cdb.Close()
	itemsDone := func() int {
		_, _, n, err := cdb.ItemCounts(context.Background(), id)
		if err != nil {
			return -1
		}
		return n
	}
	waitFor(t, "items flowing", 3*time.Minute, func() bool { return itemsDone() >= 5 })
	// Replica B knows the job (from the database) and leaves it to A.
	if st := serverJob(t, op, urlB, id); st.State != "running" {
		t.Fatalf("the job seen from replica B: %+v", st)
	}
	h.kill9(replicaA)
	killed, doneAtKill := time.Now(), itemsDone()
	t.Logf("killed replica A with %d of %d items done", doneAtKill, items)

	serveLog := filepath.Join(h.home, "serve", "jobs", id, "serve.log")
	waitFor(t, "replica B to take the job over", 2*time.Minute, func() bool {
		b, _ := os.ReadFile(serveLog)
		return strings.Contains(string(b), "resuming it")
	})
	resumed := time.Since(killed)
	waitFor(t, "items flowing again", 3*time.Minute, func() bool { return itemsDone() > doneAtKill || itemsDone() == items })
	flowing := time.Since(killed)
	t.Logf("takeover: replica B resumed the job %.1f s after the kill; items flowed again after %.1f s (goal: 30 s)", resumed.Seconds(), flowing.Seconds())
	waitFor(t, "the job to end", 5*time.Minute, func() bool {
		rows := decode[[]map[string]any](t, op.ok("--server", urlB, "status", id, "--json").out)
		return len(rows) == 1 && rows[0]["state"] != "running"
	})
	if out := readFile(t, serveLog); !strings.Contains(out, `"exit":0`) {
		t.Errorf("the job's up did not end well; its log:\n%s\nservers' log:\n%s", out, readFile(t, h.logPath))
	}
	checkServedJobEnd(t, op, urlB, id, h.home, marketURL, items)
	// Nothing twice: each item's result and finding once.
	res := filepath.Join(h.home, "serve", "results", id)
	for _, name := range []string{"items.jsonl", "findings.jsonl"} {
		seen := map[string]int{}
		for _, line := range lines(t, filepath.Join(res, name)) {
			var v struct {
				Value string          `json:"value"`
				Data  json.RawMessage `json:"data"`
			}
			json.Unmarshal([]byte(line), &v)
			seen[v.Value+string(v.Data)]++
		}
		for k, n := range seen {
			if n > 1 {
				t.Errorf("%s: %s %d times", name, k, n)
			}
		}
		if len(seen) != items {
			t.Errorf("%s: %d distinct, want %d", name, len(seen), items)
		}
	}
}
