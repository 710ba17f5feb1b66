package job

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/store"
)

// TestRecordsLiveInTheStore: a record saved is read back from the store
// (job.json is only its export), a job only a job.json knows (from before
// the store kept jobs) is still found, and a failed write is an error.
func TestRecordsLiveInTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	recs := &Records{Store: st, Dir: filepath.Join(dir, "jobs")}
	rec := &Record{ID: "a-1", State: StateRunning, StartedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), RunIDs: []int64{7, 9}}
	if err := recs.Save(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs", "a-1", "job.json")); err != nil {
		t.Errorf("no export: %v", err)
	}
	os.Remove(filepath.Join(dir, "jobs", "a-1", "job.json"))
	got, err := recs.Load(ctx, "a-1")
	if err != nil || got.State != StateRunning || len(got.RunIDs) != 2 {
		t.Fatalf("load from the store: %+v, %v", got, err)
	}
	os.MkdirAll(filepath.Join(dir, "jobs", "old-1"), 0o700)
	os.WriteFile(filepath.Join(dir, "jobs", "old-1", "job.json"), []byte(`{"id":"old-1","state":"done"}`), 0o600)
	os.MkdirAll(filepath.Join(dir, "jobs", "starting-1"), 0o700) // a detach not yet recorded
	all, err := recs.List(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("list: %d records, %v; want a-1 and old-1", len(all), err)
	}
	if _, err := recs.Load(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	st.Close()
	if err := recs.Save(ctx, rec); err == nil {
		t.Error("a save to a closed store did not fail")
	}
}

// A replacement is named by the place it took: its culled node's rank,
// also when that node was itself a replacement.
func TestNodeRanksPlaceReplacements(t *testing.T) {
	t.Parallel()
	rec := &Record{Culls: []Cull{
		{ID: 20, Replacement: &Replacement{State: Replaced, InstanceID: 40}},
		{ID: 30, Replacement: &Replacement{State: NotReplaced}},
		{ID: 40, Replacement: &Replacement{State: Replaced, InstanceID: 50}},
	}}
	got := nodeRanks(rec, []int64{10, 20, 30, 40, 50})
	want := map[int64]int{10: 0, 20: 1, 30: 2, 40: 1, 50: 1}
	if !maps.Equal(got, want) {
		t.Errorf("ranks %v, want %v", got, want)
	}
}
