package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// BadHost is a machine to avoid until Until, after a launch on it failed.
type BadHost struct {
	MachineID int64     `json:"machine_id"`
	Reason    string    `json:"reason"`
	FailedAt  time.Time `json:"failed_at"`
	Until     time.Time `json:"until"`
}

// MarkBadHost records (or replaces) a machine to avoid.
func (s *Store) MarkBadHost(ctx context.Context, h BadHost) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO bad_hosts(machine_id, reason, failed_at, until) VALUES (?, ?, ?, ?)
		ON CONFLICT(machine_id) DO UPDATE SET reason = excluded.reason, failed_at = excluded.failed_at, until = excluded.until`,
		h.MachineID, h.Reason, fmtTime(h.FailedAt), fmtTime(h.Until))
	if err != nil {
		return fmt.Errorf("store: mark bad host %d: %w", h.MachineID, err)
	}
	return nil
}

// BadHosts returns the machines still to avoid at now, by machine id.
func (s *Store) BadHosts(ctx context.Context, now time.Time) ([]BadHost, error) {
	out, err := queryAll(ctx, s.db, func(sc rowScanner) (BadHost, error) {
		var h BadHost
		var failed, until string
		if err := sc.Scan(&h.MachineID, &h.Reason, &failed, &until); err != nil {
			return h, err
		}
		var err error
		if h.FailedAt, err = parseTime(failed); err != nil {
			return h, err
		}
		h.Until, err = parseTime(until)
		return h, err
	}, "SELECT machine_id, reason, failed_at, until FROM bad_hosts WHERE until > ? ORDER BY machine_id", fmtTime(now))
	if err != nil {
		return nil, fmt.Errorf("store: bad hosts: %w", err)
	}
	return out, nil
}

// ClearBadHosts forgets the given machines, or every machine when none is
// given.
func (s *Store) ClearBadHosts(ctx context.Context, machineIDs ...int64) error {
	q := "DELETE FROM bad_hosts"
	var args []any
	if len(machineIDs) > 0 {
		q += " WHERE machine_id IN (?" + strings.Repeat(", ?", len(machineIDs)-1) + ")"
		for _, id := range machineIDs {
			args = append(args, id)
		}
	}
	if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("store: clear bad hosts: %w", err)
	}
	return nil
}
