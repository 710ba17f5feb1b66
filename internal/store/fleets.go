package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Fleet states.
const (
	FleetActive    = "active"
	FleetDone      = "done"
	FleetDestroyed = "destroyed"
)

// Fleet is one named launch. Spec is the launch parameters, opaque here.
type Fleet struct {
	Name      string
	CreatedAt time.Time
	Spec      json.RawMessage
	State     string
	EstDPH    float64
	EstHours  float64
	EstCost   float64
}

func validFleetState(s string) bool {
	return s == FleetActive || s == FleetDone || s == FleetDestroyed
}

// CreateFleet inserts f; an existing name gives ErrConflict. An empty State
// means active; an empty Spec is stored as {}.
func (s *Store) CreateFleet(ctx context.Context, f Fleet) error {
	if f.Name == "" {
		return fmt.Errorf("store: create fleet: empty name")
	}
	if f.State == "" {
		f.State = FleetActive
	}
	if !validFleetState(f.State) {
		return fmt.Errorf("store: create fleet %q: bad state %q", f.Name, f.State)
	}
	spec := string(f.Spec)
	if len(f.Spec) == 0 {
		spec = "{}"
	} else if !json.Valid(f.Spec) {
		return fmt.Errorf("store: create fleet %q: spec is not valid JSON", f.Name)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM fleets WHERE name = ?", f.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("store: fleet %q already exists: %w", f.Name, ErrConflict)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO fleets(name, created_at, spec, state, est_dph, est_hours, est_cost)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, f.Name, fmtTime(f.CreatedAt), spec, f.State, f.EstDPH, f.EstHours, f.EstCost)
		if err != nil {
			return fmt.Errorf("store: create fleet %q: %w", f.Name, err)
		}
		return nil
	})
}

const fleetCols = "name, created_at, spec, state, est_dph, est_hours, est_cost"

func scanFleet(sc rowScanner) (Fleet, error) {
	var f Fleet
	var created, spec string
	if err := sc.Scan(&f.Name, &created, &spec, &f.State, &f.EstDPH, &f.EstHours, &f.EstCost); err != nil {
		return Fleet{}, err
	}
	t, err := parseTime(created)
	if err != nil {
		return Fleet{}, err
	}
	f.CreatedAt = t
	f.Spec = json.RawMessage(spec)
	return f, nil
}

// GetFleet returns the named fleet, or ErrNotFound.
func (s *Store) GetFleet(ctx context.Context, name string) (Fleet, error) {
	f, err := scanFleet(s.db.QueryRowContext(ctx, "SELECT "+fleetCols+" FROM fleets WHERE name = ?", name))
	return oneRow(f, err, "store: fleet %q", name)
}

// FleetExists reports whether the named fleet has a row, without reading
// it (a fleet's spec holds its whole candidate list).
func (s *Store) FleetExists(ctx context.Context, name string) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, "SELECT 1 FROM fleets WHERE name = ?", name).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: fleet %q: %w", name, err)
	}
	return true, nil
}

// ListFleets returns every fleet, oldest first.
func (s *Store) ListFleets(ctx context.Context) ([]Fleet, error) {
	out, err := queryAll(ctx, s.db, scanFleet, "SELECT "+fleetCols+" FROM fleets ORDER BY created_at, name")
	if err != nil {
		return nil, fmt.Errorf("store: list fleets: %w", err)
	}
	return out, nil
}

// SetFleetState changes a fleet's state (active, done, destroyed).
func (s *Store) SetFleetState(ctx context.Context, name, state string) error {
	if !validFleetState(state) {
		return fmt.Errorf("store: fleet %q: bad state %q", name, state)
	}
	res, err := s.db.ExecContext(ctx, "UPDATE fleets SET state = ? WHERE name = ?", state, name)
	if err != nil {
		return fmt.Errorf("store: fleet %q: %w", name, err)
	}
	return mustAffect(res, fmt.Sprintf("fleet %q", name))
}

func mustAffect(res sql.Result, what string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("store: %s: %w", what, ErrNotFound)
	}
	return nil
}

// FleetNames are the names of the fleets, in ListFleets' order.
func (s *Store) FleetNames(ctx context.Context) ([]string, error) {
	all, err := s.ListFleets(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(all))
	for i, fl := range all {
		names[i] = fl.Name
	}
	return names, nil
}
