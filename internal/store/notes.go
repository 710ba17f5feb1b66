package store

import (
	"context"
	"fmt"
	"time"
)

// Note is one line about an instance: what vastfleet did to it unasked,
// and why.
type Note struct {
	InstanceID int64
	At         time.Time
	Text       string
}

// AddNote records a note on an instance.
func (s *Store) AddNote(ctx context.Context, id int64, at time.Time, text string) error {
	if _, err := s.db.ExecContext(ctx, "INSERT INTO instance_notes (instance_id, at, note) VALUES (?, ?, ?)", id, fmtTime(at), text); err != nil {
		return fmt.Errorf("store: note on instance %d: %w", id, err)
	}
	return nil
}

// Notes returns an instance's notes, oldest first.
func (s *Store) Notes(ctx context.Context, id int64) ([]Note, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT instance_id, at, note FROM instance_notes WHERE instance_id = ? ORDER BY seq", id)
	if err != nil {
		return nil, fmt.Errorf("store: notes of instance %d: %w", id, err)
	}
	defer rows.Close()
	var out []Note
	for rows.Next() {
		var n Note
		var at string
		if err := rows.Scan(&n.InstanceID, &at, &n.Text); err != nil {
			return nil, fmt.Errorf("store: notes of instance %d: %w", id, err)
		}
		if n.At, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("store: notes of instance %d: %w", id, err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
