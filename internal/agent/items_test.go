package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/wire"
)

func TestItemCommandQuotes(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]string{
		"42":           `run 42 --out 42.json`, // a plain word needs no quotes
		"lr=0.1 bs=32": `run 'lr=0.1 bs=32' --out 'lr=0.1 bs=32'.json`,
		"it's; rm -rf": `run 'it'\''s; rm -rf' --out 'it'\''s; rm -rf'.json`,
	} {
		if got := itemCommand("run {item} --out {item}.json", v); got != want {
			t.Errorf("itemCommand(%q) = %s, want %s", v, got, want)
		}
	}
	tb := &tailBuffer{max: 10}
	fmt.Fprint(tb, "first line\nsecond\nthird\n")
	if got := tb.String(); got != "third\n" {
		t.Errorf("tail = %q, want the whole lines of the last 10 bytes", got)
	}
}

// Five agents work through 40 items against the real coordinator (SQLite
// file, loopback HTTP). One is killed while it holds an item, and the
// coordinator commits the first ten results but answers 503, so the
// agents send them again. Every item is done exactly once, by a live
// agent, with its output, and every finding is stored once.
func TestItemWorkersSurviveALostAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const items = 40
	values := make([]string, items)
	for i := range values {
		values[i] = strconv.Itoa(100 + i)
	}
	db, token := fleetWithItems(t, values)
	srv, err := coord.New(coord.Config{DB: db, HeartbeatInterval: 50 * time.Millisecond, Members: anyInstance})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var resultPosts, swallowed atomic.Int64
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wire.PathItemsResult {
			if resultPosts.Add(1) <= 10 {
				// Stored, but the answer is lost: the agent sends it again.
				h.ServeHTTP(httptest.NewRecorder(), r)
				swallowed.Add(1)
				http.Error(w, `{"error":"lost answer"}`, http.StatusServiceUnavailable)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()

	const work = `printf '{"found":{"n":%s}}\n' {item}; sleep 0.02; echo did {item}`
	agents := make([]*running, 5)
	for i := range agents {
		cmd := work
		if i == 0 {
			cmd = "sleep 60; " + work // killed before it finishes anything
		}
		cfg := Config{
			CoordURL: hs.URL, Fleet: "f1", Node: fmt.Sprintf("n%d", i), Token: token, InstanceID: int64(i + 1),
			Sessions: []wire.Session{{Name: "work", Command: cmd}},
			StateDir: t.TempDir(), StopGrace: time.Second, FirstJitter: -1,
			FirstInterval: 50 * time.Millisecond, restartBase: 10 * time.Millisecond, retryBase: 10 * time.Millisecond,
		}
		agents[i] = start(t, cfg)
	}
	var held int64
	eventually(t, "n0 to hold an item", func() bool {
		res, _ := srv.Snapshot(ctx, "f1"), 0
		for _, n := range res.Nodes {
			if n.Node == "n0" && len(n.Sessions) == 1 && n.Sessions[0].Item > 0 {
				held = n.Sessions[0].Item
				return true
			}
		}
		return false
	})
	agents[0].stop(t)

	deadline := time.Now().Add(60 * time.Second)
	for {
		q, l, d, err := db.ItemCounts(ctx, "f1")
		if err != nil {
			t.Fatal(err)
		}
		if d == items {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d queued, %d leased, %d done after 60 s", q, l, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	results, err := db.ItemResults(ctx, "f1")
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != items {
		t.Fatalf("%d results, want %d", len(results), items)
	}
	replayed := 0
	for _, r := range results {
		if r.Node == "n0" || r.ExitCode != 0 || r.StdoutTail != fmt.Sprintf(`{"found":{"n":%s}}`+"\ndid %s\n", r.Value, r.Value) {
			t.Errorf("item %d (%s): node %s, exit %d, tail %q", r.ID, r.Value, r.Node, r.ExitCode, r.StdoutTail)
		}
		if r.ID == held && r.Attempts < 2 {
			t.Errorf("item %d, held by the killed agent, was leased %d times; want it leased again", r.ID, r.Attempts)
		}
		replayed += r.Results - 1
	}
	if swallowed.Load() != 10 || replayed < 10 {
		t.Errorf("%d answers swallowed, %d results beyond the first; want 10 and at least 10", swallowed.Load(), replayed)
	}
	fs, err := db.Findings(ctx, "f1", 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, f := range fs {
		var data struct{ N int }
		json.Unmarshal(f.Data, &data)
		if seen[f.Item] || f.Key != fmt.Sprintf("item/%d/1", f.Item) || strconv.Itoa(data.N) != values[f.Item-1] {
			t.Errorf("finding %+v (data %s): repeated, or not its item's", f, f.Data)
		}
		seen[f.Item] = true
	}
	if len(fs) != items {
		t.Errorf("%d findings stored, want one per item (%d)", len(fs), items)
	}
	// The workers stop once the coordinator says every item is done.
	eventually(t, "the live workers to finish", func() bool {
		snap := srv.Snapshot(ctx, "f1")
		exited := 0
		for _, n := range snap.Nodes {
			for _, s := range n.Sessions {
				if s.State == stateExited {
					exited++
				}
			}
		}
		return exited == 4
	})
}

// An item worker whose After file is missing leases nothing, so a node
// left out of a job's run holds no item; it starts once the file exists.
func TestItemWorkerWaitsForItsAfterFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, token := fleetWithItems(t, []string{"1", "2", "3"})
	srv, err := coord.New(coord.Config{DB: db, HeartbeatInterval: 50 * time.Millisecond, Members: anyInstance})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	marker := filepath.Join(t.TempDir(), "go")
	a := start(t, Config{
		CoordURL: hs.URL, Fleet: "f1", Node: "n0", Token: token, InstanceID: 1,
		Sessions: []wire.Session{{Name: "work", Command: "echo did {item}", After: marker}},
		StateDir: t.TempDir(), StopGrace: time.Second, FirstJitter: -1,
		FirstInterval: 50 * time.Millisecond, restartBase: 10 * time.Millisecond, retryBase: 10 * time.Millisecond,
	})
	defer a.stop(t)
	eventually(t, "the session to report waiting", func() bool {
		for _, n := range srv.Snapshot(ctx, "f1").Nodes {
			if n.Node == "n0" && len(n.Sessions) == 1 && n.Sessions[0].State == stateWaiting {
				return true
			}
		}
		return false
	})
	if q, l, d, _ := db.ItemCounts(ctx, "f1"); q != 3 || l != 0 || d != 0 {
		t.Fatalf("before the After file: %d queued, %d leased, %d done; want 3 queued", q, l, d)
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every item done", func() bool {
		_, _, d, _ := db.ItemCounts(ctx, "f1")
		return d == 3
	})
}

// anyInstance lets instances 1..99 of any fleet enroll, each on its own
// machine.
var anyInstance = coord.MembershipFunc(func(context.Context, string) (map[int64]coord.Instance, error) {
	out := map[int64]coord.Instance{}
	for id := int64(1); id < 100; id++ {
		out[id] = coord.Instance{MachineID: 1000 + id}
	}
	return out, nil
})

// fleetWithItems is a coordinator database with fleet f1 holding the
// items; it returns the database and the fleet's agent token.
func fleetWithItems(t *testing.T, values []string) (*coord.DB, string) {
	t.Helper()
	ctx := context.Background()
	db, err := coord.OpenDB(ctx, filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	token, _, err := db.FleetTokens(ctx, "f1")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.AddItems(ctx, "f1", values); err != nil {
		t.Fatal(err)
	}
	return db, token
}
