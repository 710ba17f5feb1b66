package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestJobsUpsertAndList: a job's record is replaced on save, read back
// whole, and jobs list newest first.
func TestJobsUpsertAndList(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, j := range []JobRow{
		{ID: "old", State: "done", StartedAt: t0, UpdatedAt: t0, Record: []byte(`{"id":"old"}`)},
		{ID: "new", State: "launching", StartedAt: t0.Add(time.Hour), UpdatedAt: t0.Add(time.Hour), Record: []byte(`{"v":1}`)},
		{ID: "new", State: "running", StartedAt: t0.Add(time.Hour), UpdatedAt: t0.Add(2 * time.Hour), Record: []byte(`{"v":2}`)},
	} {
		if err := s.SaveJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Job(ctx, "new")
	if err != nil || got.State != "running" || string(got.Record) != `{"v":2}` || !got.UpdatedAt.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("job new: %+v, %v", got, err)
	}
	all, err := s.Jobs(ctx)
	if err != nil || len(all) != 2 || all[0].ID != "new" || all[1].ID != "old" {
		t.Errorf("jobs: %+v, %v", all, err)
	}
	if _, err := s.Job(ctx, "none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
}
