package coord

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

func testAddItemsIsIdempotent(t *testing.T, backend string) {
	ctx := context.Background()
	db := openBackend(t, backend)
	defer db.Close()
	for range 2 {
		if err := db.AddItems(ctx, "alpha", []string{"a", "b", "c"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AddItems(ctx, "alpha", []string{"c", "d", "d"}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddItems(ctx, "beta", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	q, l, d, err := db.ItemCounts(ctx, "alpha")
	if err != nil || q != 4 || l != 0 || d != 0 {
		t.Fatalf("counts = %d queued, %d leased, %d done (%v); want 4, 0, 0", q, l, d, err)
	}
	var id int64
	if err := db.db.QueryRowContext(t.Context(), `SELECT id FROM items WHERE fleet = 'alpha' AND value = 'd'`).Scan(&id); err != nil || id != 4 {
		t.Fatalf("id of d = %d (%v), want 4: new items take the next ids", id, err)
	}
	for _, bad := range [][]string{{""}, {"a\x00b"}, {strings.Repeat("x", maxItemLen+1)}} {
		if err := db.AddItems(ctx, "alpha", bad); err == nil {
			t.Errorf("AddItems(%q) accepted", bad)
		}
	}
}

func (r *rig) lease(node, session string) (int, wire.ItemLease) {
	r.t.Helper()
	var l wire.ItemLease
	code, _ := r.do("POST", wire.PathItemsLease, r.node(node), wire.ItemLeaseRequest{Fleet: "alpha", Node: node, Session: session}, &l)
	return code, l
}

func (r *rig) result(node string, id int64, lease string, exit int, tail string) (int, wire.ItemResultAck) {
	r.t.Helper()
	var ack wire.ItemResultAck
	code, _ := r.do("POST", wire.PathItemsResult, r.node(node), wire.ItemResult{Fleet: "alpha", Node: node, Session: "work",
		ID: id, Lease: lease, ExitCode: exit, StdoutTail: tail}, &ack)
	return code, ack
}

func (r *rig) beat(node string) {
	r.t.Helper()
	if code, _ := r.do("POST", wire.PathHeartbeat, r.node(node), heartbeat("alpha", node), nil); code != http.StatusOK {
		r.t.Fatalf("heartbeat of %s: %d", node, code)
	}
}

// A lease lasts while its node's heartbeats do (on the injected clock):
// a node that keeps beating keeps its item however long it runs, a node
// that goes quiet loses it to the queue, and the next lease request gets it.
func testItemLeaseExpiresWhenItsNodeGoesQuiet(t *testing.T, backend string) {
	clk := newFakeClock()
	r := newRigOn(t, backend, func(c *Config) { c.Clock = clk; c.HeartbeatInterval = 10 * time.Second })
	if err := r.db.AddItems(context.Background(), "alpha", []string{"x", "y", "z"}); err != nil {
		t.Fatal(err)
	}
	r.beat("n1")
	r.beat("n2")
	_, l1 := r.lease("n1", "work")
	_, l2 := r.lease("n2", "work")
	if l1.Item == nil || l1.Item.ID != 1 || l1.Item.Value != "x" || l1.LeaseS != 30 || l1.Left != 3 {
		t.Fatalf("n1's lease = %+v, want item 1 (x) for 30 s of 3 left", l1)
	}
	if l2.Item == nil || l2.Item.ID != 2 {
		t.Fatalf("n2's lease = %+v, want item 2", l2)
	}
	// n1 keeps beating, n2 falls silent.
	for range 6 {
		clk.Advance(10 * time.Second)
		r.beat("n1")
	}
	_, l3 := r.lease("n3", "work")
	if l3.Item == nil || l3.Item.ID != 2 || l3.Lease != "2" {
		t.Fatalf("n3's lease = %+v, want item 2 again (its second lease): n2 went quiet", l3)
	}
	if q, l, _, _ := r.db.ItemCounts(context.Background(), "alpha"); q != 1 || l != 2 {
		t.Fatalf("counts: %d queued, %d leased; want 1 and 2 (n1 still holds item 1)", q, l)
	}
	// A lease never renewed by a heartbeat runs out at its own time.
	clk.Advance(31 * time.Second)
	r.beat("n1")
	_, l4 := r.lease("n4", "work")
	if l4.Item == nil || l4.Item.ID != 2 {
		t.Fatalf("n4's lease = %+v, want item 2 (n3 never sent a heartbeat)", l4)
	}
	// Asking again puts back what the session held: it abandoned it.
	_, l1b := r.lease("n1", "work")
	if l1b.Item == nil || l1b.Item.ID != 1 || l1b.Lease != "2" {
		t.Fatalf("n1's second lease = %+v, want item 1 back", l1b)
	}
}

// The first result for an item is the one kept: a late one from the node
// that lost the lease and a replay are acknowledged and ignored.
func testItemResultIsStoredOnce(t *testing.T, backend string) {
	clk := newFakeClock()
	r := newRigOn(t, backend, func(c *Config) { c.Clock = clk; c.HeartbeatInterval = 10 * time.Second })
	ctx := context.Background()
	if err := r.db.AddItems(ctx, "alpha", []string{"only"}); err != nil {
		t.Fatal(err)
	}
	_, slow := r.lease("slow", "work")
	clk.Advance(time.Minute)
	_, fast := r.lease("fast", "work")
	if fast.Item == nil || fast.Item.ID != 1 || fast.Lease != "2" {
		t.Fatalf("fast's lease = %+v, want item 1 after slow's lease ran out", fast)
	}
	// Everything leased, nothing queued: come back later.
	code, wait := r.lease("other", "work")
	if code != http.StatusOK || wait.Item != nil || wait.RetryS != 10 || wait.Left != 1 {
		t.Fatalf("lease with all leased = %d %+v, want 200, no item, retry in 10 s", code, wait)
	}
	if code, ack := r.result("fast", 1, fast.Lease, 0, "fast's output"); code != 200 || !ack.Stored {
		t.Fatalf("first result: %d %+v, want stored", code, ack)
	}
	if code, ack := r.result("slow", 1, slow.Lease, 3, "slow's output"); code != 200 || ack.Stored {
		t.Fatalf("late result: %d %+v, want acknowledged, not stored", code, ack)
	}
	if code, ack := r.result("fast", 1, fast.Lease, 0, "fast's output"); code != 200 || ack.Stored {
		t.Fatalf("replayed result: %d %+v, want acknowledged, not stored", code, ack)
	}
	m := r.metrics()
	for _, want := range []string{`vastfleet_result_replays_total{fleet="alpha",node="fast"} 1`, `vastfleet_result_replays_total{fleet="alpha",node="slow"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "vastfleet_result_replays_total"))
		}
	}
	if code, _ := r.lease("other", "work"); code != http.StatusNoContent {
		t.Fatalf("lease with every item done: %d, want 204", code)
	}
	res, err := r.db.ItemResults(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Node != "fast" || res[0].StdoutTail != "fast's output" || res[0].ExitCode != 0 ||
		res[0].Lease != "2" || res[0].Attempts != 2 || res[0].Results != 3 {
		t.Fatalf("results = %+v, want fast's, after 2 leases and 3 results", res)
	}
	if code, _ := r.result("fast", 99, "1", 0, ""); code != http.StatusNotFound {
		t.Fatalf("result for an unknown item: %d, want 404", code)
	}
	// The live totals count items once the sweep has run.
	r.srv.sweepItems()
	if tot := r.srv.Snapshot(ctx, "alpha").Totals; tot.ItemsDone != 1 || tot.ItemsLeft != 0 {
		t.Fatalf("totals: %d done, %d left; want 1 and 0", tot.ItemsDone, tot.ItemsLeft)
	}
}

func TestItemEndpointsRefuseStrangers(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	ctx := context.Background()
	otherAgent, _, err := r.db.FleetTokens(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.db.AddItems(ctx, "alpha", []string{"secret"}); err != nil {
		t.Fatal(err)
	}
	req := wire.ItemLeaseRequest{Fleet: "alpha", Node: "n", Session: "work"}
	for _, c := range []struct {
		name, token string
		body        any
		want        int
	}{
		{"no token", "", req, http.StatusUnauthorized},
		{"viewer token", r.viewer, req, http.StatusForbidden},
		{"another fleet's token", otherAgent, req, http.StatusForbidden},
		{"malformed JSON", r.node("n"), `{"fleet":`, http.StatusBadRequest},
		{"no session", r.node("n"), wire.ItemLeaseRequest{Fleet: "alpha", Node: "n"}, http.StatusBadRequest},
	} {
		if code, _ := r.do("POST", wire.PathItemsLease, c.token, c.body, nil); code != c.want {
			t.Errorf("lease with %s: %d, want %d", c.name, code, c.want)
		}
	}
	bad := wire.ItemResult{Fleet: "alpha", Node: "n", ID: 1, Lease: "1", StdoutTail: strings.Repeat("x", wire.MaxStdoutTail+1)}
	if code, _ := r.do("POST", wire.PathItemsResult, r.node(bad.Node), bad, nil); code != http.StatusBadRequest {
		t.Errorf("oversized stdout tail: %d, want 400", code)
	}
	if q, l, d, _ := r.db.ItemCounts(ctx, "alpha"); q != 1 || l != 0 || d != 0 {
		t.Errorf("counts after refused requests: %d %d %d, want the item still queued", q, l, d)
	}
}

// Leases and results live in coord.db: a restarted coordinator knows who
// holds what and which results are in.
func testItemsSurviveACoordinatorRestart(t *testing.T, backend string) {
	clk := newFakeClock()
	edit := func(c *Config) { c.Clock = clk; c.HeartbeatInterval = 10 * time.Second }
	r := newRigOn(t, backend, edit)
	ctx := context.Background()
	if err := r.db.AddItems(ctx, "alpha", []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	r.beat("n1")
	_, a := r.lease("n1", "work")
	r.result("n1", a.Item.ID, a.Lease, 0, "")
	_, b := r.lease("n1", "work")
	r.srv.Close() // saves n1's heartbeat
	r.http.Close()
	r.start(edit)
	clk.Advance(20 * time.Second)
	r.beat("n1")
	if _, l := r.lease("n2", "work"); l.Item != nil {
		t.Fatalf("n2 got %+v while n1 still holds item %d", l.Item, b.Item.ID)
	}
	if code, ack := r.result("n1", b.Item.ID, b.Lease, 0, ""); code != 200 || !ack.Stored {
		t.Fatalf("result after restart: %d %+v", code, ack)
	}
	if _, _, d, _ := r.db.ItemCounts(ctx, "alpha"); d != 2 {
		t.Fatalf("%d done, want 2", d)
	}
}
