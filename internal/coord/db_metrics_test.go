package coord

import (
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
