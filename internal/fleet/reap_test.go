package fleet

import (
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/store"
)

func TestAbandonedPicksOnlyOwnSilentLiveInstances(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	own, other := "0a0b0c0d", "11223344"
	row := func(id int64, storeID, fleet, wanted string) store.Instance {
		return store.Instance{ID: id, Fleet: "f", Label: Label(storeID, fleet, id, ""), Wanted: wanted}
	}
	recs := []store.Instance{
		row(1, own, "f", store.WantRunning),   // silent: reaped
		row(2, own, "f", store.WantRunning),   // heard recently
		row(3, own, "f", store.WantRunning),   // never heard
		row(4, other, "f", store.WantRunning), // another data dir's label
		row(5, own, "g", store.WantRunning),   // another fleet's label
		row(6, own, "f", store.WantParked),    // already stopped on purpose
		row(7, own, "f", store.WantDestroy),   // already being destroyed
	}
	gone := row(8, own, "f", store.WantRunning)
	gone.GoneAt = now.Add(-time.Hour)
	recs = append(recs, gone)
	long := now.Add(-2 * time.Hour)
	heard := map[int64]time.Time{1: long, 2: now.Add(-time.Minute), 4: long, 5: long, 6: long, 7: long, 8: long}
	o := ReapOptions{Fleet: "f", LastHeard: heard, After: 30 * time.Minute, Policy: ReapStop}

	got := Abandoned(recs, own, o, now)
	if len(got) != 1 || got[0].ID != 1 || got[0].Silent != 2*time.Hour || got[0].Action != ReapStop {
		t.Fatalf("stop: %+v, want only instance 1, silent 2h", got)
	}
	o.Policy = ReapDestroy
	if got := Abandoned(recs, own, o, now); len(got) != 2 || got[0].ID != 1 || got[1].ID != 6 {
		t.Fatalf("destroy: %+v, want 1 and the parked 6", got)
	}
	// A coordinator that started 10 minutes ago heard nobody before: no
	// one has been silent on its watch for 30 minutes yet.
	o.Since = now.Add(-10 * time.Minute)
	if got := Abandoned(recs, own, o, now); len(got) != 0 {
		t.Fatalf("right after a coordinator start: %+v, want none", got)
	}
}
