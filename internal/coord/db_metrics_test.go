package coord

import (
	"slices"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// TestLastMetrics: a fleet's saved heartbeats give each instance's last
// metrics; other fleets', metric-less and instance-less nodes are left
// out, and of two rows for one instance the newer wins.
func testLastMetrics(t *testing.T, backend string) {
	ctx := t.Context()
	db := openBackend(t, backend)
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	hb := func(node string, id int64, m map[string]float64) wire.Heartbeat {
		return wire.Heartbeat{Node: node, InstanceID: id, Metrics: m}
	}
	err := db.saveNodes(ctx, []savedNode{
		{fleet: "f", lastSeen: t0, hb: hb("a", 1, map[string]float64{"hashes_per_s": 100})},
		{fleet: "f", lastSeen: t0.Add(time.Minute), hb: hb("a2", 1, map[string]float64{"hashes_per_s": 150})},
		{fleet: "f", lastSeen: t0, hb: hb("b", 2, nil)},
		{fleet: "f", lastSeen: t0, hb: hb("c", 0, map[string]float64{"hashes_per_s": 7})},
		{fleet: "g", lastSeen: t0, hb: hb("d", 3, map[string]float64{"hashes_per_s": 9})},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.LastMetrics(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[1].Metrics["hashes_per_s"] != 150 || !got[1].At.Equal(t0.Add(time.Minute)) {
		t.Fatalf("last metrics %+v", got)
	}
}

// testGroupCommitStoresEachKeyOnce: in one group commit, a key already
// stored is not stored again, a key two batches share is stored from the
// first, and each batch learns which of its findings were new; a node
// saved twice in one flush keeps its last heartbeat.
func testGroupCommitStoresEachKeyOnce(t *testing.T, backend string) {
	ctx := t.Context()
	db := openBackend(t, backend)
	batch := func(fleet, node string, keys ...string) *findingsReq {
		r := &findingsReq{fleet: fleet, node: node, receivedAt: time.Now()}
		for _, k := range keys {
			r.items = append(r.items, wire.Finding{Key: k, Session: "s", At: time.Now(), Data: []byte(`{"n":1}`)})
		}
		return r
	}
	if err := db.insertFindings(ctx, []*findingsReq{batch("f", "a", "k1", "k2")}); err != nil {
		t.Fatal(err)
	}
	b, c, g := batch("f", "b", "k2", "k3"), batch("f", "c", "k3", "k4"), batch("g", "d", "k1")
	if err := db.insertFindings(ctx, []*findingsReq{b, c, g}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		r   *findingsReq
		new []int
	}{{b, []int{1}}, {c, []int{1}}, {g, []int{0}}} {
		if x.r.stored != len(x.new) || !slices.Equal(x.r.new, x.new) {
			t.Errorf("batch of %s: stored %d, new %v; want %v", x.r.node, x.r.stored, x.r.new, x.new)
		}
	}
	fs, err := db.Findings(ctx, "f", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fs {
		got = append(got, f.Key+"@"+f.Node)
	}
	if want := []string{"k1@a", "k2@a", "k3@b", "k4@c"}; !slices.Equal(got, want) {
		t.Errorf("fleet f's findings %v, want %v", got, want)
	}
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	hb := func(m float64) wire.Heartbeat {
		return wire.Heartbeat{Node: "a", InstanceID: 1, Metrics: map[string]float64{"m": m}}
	}
	if err := db.saveNodes(ctx, []savedNode{{fleet: "f", lastSeen: t0, hb: hb(1)}, {fleet: "f", lastSeen: t0.Add(time.Second), hb: hb(2)}}); err != nil {
		t.Fatal(err)
	}
	if m, err := db.LastMetrics(ctx, "f"); err != nil || m[1].Metrics["m"] != 2 {
		t.Errorf("last metrics %+v, %v: want the node's last heartbeat", m, err)
	}
}
