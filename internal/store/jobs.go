package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// JobRow is one job's record as the job package writes it: the columns a
// listing needs, and the whole record as JSON (the store does not read it).
type JobRow struct {
	ID        string
	State     string
	StartedAt time.Time
	UpdatedAt time.Time
	Record    []byte
}

// SaveJob inserts or replaces a job's record.
func (s *Store) SaveJob(ctx context.Context, j JobRow) error {
	if j.ID == "" {
		return fmt.Errorf("store: save job: no id")
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO jobs (id, state, started_at, updated_at, record) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET state = excluded.state, started_at = excluded.started_at,
		updated_at = excluded.updated_at, record = excluded.record`,
		j.ID, j.State, fmtTime(j.StartedAt), fmtTime(j.UpdatedAt), string(j.Record))
	if err != nil {
		return fmt.Errorf("store: save job %s: %w", j.ID, err)
	}
	return nil
}

// Job returns one job's record; ErrNotFound (wrapped) when there is none.
func (s *Store) Job(ctx context.Context, id string) (JobRow, error) {
	rows, err := s.jobs(ctx, "WHERE id = ?", id)
	if err != nil {
		return JobRow{}, err
	}
	if len(rows) == 0 {
		return JobRow{}, fmt.Errorf("store: job %s: %w", id, ErrNotFound)
	}
	return rows[0], nil
}

// Jobs returns every job, newest first.
func (s *Store) Jobs(ctx context.Context) ([]JobRow, error) {
	return s.jobs(ctx, "")
}

func (s *Store) jobs(ctx context.Context, where string, args ...any) ([]JobRow, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, state, started_at, updated_at, record FROM jobs "+where+" ORDER BY started_at DESC, id", args...)
	if err != nil {
		return nil, fmt.Errorf("store: jobs: %w", err)
	}
	defer rows.Close()
	var out []JobRow
	for rows.Next() {
		var j JobRow
		var started, updated, rec string
		if err := rows.Scan(&j.ID, &j.State, &started, &updated, &rec); err != nil {
			return nil, fmt.Errorf("store: jobs: %w", err)
		}
		if j.StartedAt, err = parseTime(started); err != nil {
			return nil, fmt.Errorf("store: job %s: %w", j.ID, err)
		}
		if j.UpdatedAt, err = parseTime(updated); err != nil {
			return nil, fmt.Errorf("store: job %s: %w", j.ID, err)
		}
		j.Record = []byte(rec)
		out = append(out, j)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: jobs: %w", err)
	}
	return out, nil
}
