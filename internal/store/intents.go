package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Intent states.
const (
	IntentPending   = "pending"   // written before the create call
	IntentCreated   = "created"   // the marketplace returned (or showed) an instance
	IntentFailed    = "failed"    // the call failed and no instance carries the label
	IntentAbandoned = "abandoned" // given up on without knowing the outcome
)

// Intent is the record, written before a create call, that a rent is about
// to happen. Its Label goes on the instance, so after a crash or a lost
// response the instance can be found by label.
type Intent struct {
	ID        int64
	Fleet     string
	OfferID   int64
	MachineID int64
	Label     string
	// BatchLabel is the label of the bulk create that rented this intent
	// with others ("" for a create of its own); the instance carries it
	// instead of Label.
	BatchLabel string
	Request    json.RawMessage
	CreatedAt  time.Time
	UpdatedAt  time.Time
	State      string
	InstanceID int64 // 0 until created
	Error      string
}

// InstanceLabel is the label the intent's instance carries: its batch's,
// when a bulk create rented it.
func (in Intent) InstanceLabel() string {
	if in.BatchLabel != "" {
		return in.BatchLabel
	}
	return in.Label
}

func requestText(b []byte) (string, error) {
	if len(b) == 0 {
		return "{}", nil
	}
	if !json.Valid(b) {
		return "", fmt.Errorf("request is not valid JSON")
	}
	return string(b), nil
}

// CreateIntent inserts a pending intent whose Label is already known and
// returns it with its ID. The fleet must exist.
func (s *Store) CreateIntent(ctx context.Context, in Intent) (Intent, error) {
	if in.Label == "" {
		return Intent{}, fmt.Errorf("store: create intent: empty label (use NewIntent to derive it from the id)")
	}
	return s.NewIntent(ctx, in.Fleet, in.OfferID, in.MachineID, in.Request, in.CreatedAt,
		func(int64) string { return in.Label })
}

// NewIntent inserts a pending intent and sets its label to label(id) in the
// same transaction, so no intent is ever visible without its label.
func (s *Store) NewIntent(ctx context.Context, fleet string, offerID, machineID int64, requestJSON []byte, now time.Time, label func(id int64) string) (Intent, error) {
	req, err := requestText(requestJSON)
	if err != nil {
		return Intent{}, fmt.Errorf("store: new intent: %w", err)
	}
	var in Intent
	err = s.tx(ctx, func(tx *sql.Tx) error {
		in, err = insertIntent(ctx, tx, fleet, offerID, machineID, req, now, label, nil)
		return err
	})
	if err != nil {
		return Intent{}, fmt.Errorf("store: new intent (fleet %q, offer %d): %w", fleet, offerID, err)
	}
	return in, nil
}

// insertIntent inserts a pending intent in tx and labels it: label(id),
// and batch(id) as its batch label when batch is not nil.
func insertIntent(ctx context.Context, tx *sql.Tx, fleet string, offerID, machineID int64, req string, now time.Time,
	label, batch func(id int64) string) (Intent, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO intents(fleet, offer_id, machine_id, request, created_at, updated_at, state)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, fleet, offerID, machineID, req, fmtTime(now), fmtTime(now), IntentPending)
	if err != nil {
		return Intent{}, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return Intent{}, err
	}
	l := label(id)
	if l == "" {
		return Intent{}, fmt.Errorf("label for intent %d is empty", id)
	}
	var batchLabel any // NULL for a create of its own
	if batch != nil {
		b := batch(id)
		if b == "" || b == l {
			return Intent{}, fmt.Errorf("intent %d: batch label %q must be set and differ from its label", id, b)
		}
		batchLabel = b
	}
	if _, err := tx.ExecContext(ctx, "UPDATE intents SET label = ?, batch_label = ? WHERE id = ?", l, batchLabel, id); err != nil {
		return Intent{}, err
	}
	return scanIntent(tx.QueryRowContext(ctx, "SELECT "+intentCols+" FROM intents WHERE id = ?", id))
}

const intentCols = "id, fleet, offer_id, machine_id, label, request, created_at, updated_at, state, instance_id, error, batch_label"

func scanIntent(sc rowScanner) (Intent, error) {
	var in Intent
	var label, batch sql.NullString
	var req, created, updated string
	var inst sql.NullInt64
	if err := sc.Scan(&in.ID, &in.Fleet, &in.OfferID, &in.MachineID, &label, &req, &created, &updated, &in.State, &inst, &in.Error, &batch); err != nil {
		return Intent{}, err
	}
	in.Label, in.BatchLabel = label.String, batch.String
	in.Request = json.RawMessage(req)
	in.InstanceID = inst.Int64
	var err error
	if in.CreatedAt, err = parseTime(created); err != nil {
		return Intent{}, err
	}
	if in.UpdatedAt, err = parseTime(updated); err != nil {
		return Intent{}, err
	}
	return in, nil
}

func (s *Store) queryIntents(ctx context.Context, where string, args ...any) ([]Intent, error) {
	return queryAll(ctx, s.db, scanIntent, "SELECT "+intentCols+" FROM intents "+where, args...)
}

// Intent returns one intent by id, or ErrNotFound.
func (s *Store) Intent(ctx context.Context, id int64) (Intent, error) {
	in, err := scanIntent(s.db.QueryRowContext(ctx, "SELECT "+intentCols+" FROM intents WHERE id = ?", id))
	return oneRow(in, err, "store: intent %d", id)
}

// IntentByLabel returns the intent carrying label, or ErrNotFound.
func (s *Store) IntentByLabel(ctx context.Context, label string) (Intent, error) {
	in, err := scanIntent(s.db.QueryRowContext(ctx, "SELECT "+intentCols+" FROM intents WHERE label = ?", label))
	return oneRow(in, err, "store: intent labelled %q", label)
}

// IntentOffer is one offer of a batch of intents.
type IntentOffer struct {
	OfferID, MachineID int64
}

// NewIntentBatch inserts a pending intent per offer, all in one transaction,
// for one bulk create: each gets its own label(id), and all get the batch
// label batch(first id). Offers must be on distinct machines, since an
// instance of the batch is matched to its intent by machine.
func (s *Store) NewIntentBatch(ctx context.Context, fleet string, offers []IntentOffer, requestJSON []byte, now time.Time,
	label func(id int64) string, batch func(firstID int64) string) ([]Intent, error) {
	req, err := requestText(requestJSON)
	if err != nil {
		return nil, fmt.Errorf("store: new intent batch: %w", err)
	}
	seen := make(map[int64]bool, len(offers))
	for _, o := range offers {
		if o.MachineID <= 0 || seen[o.MachineID] {
			return nil, fmt.Errorf("store: new intent batch: machine %d of offer %d is unknown or twice in the batch", o.MachineID, o.OfferID)
		}
		seen[o.MachineID] = true
	}
	var out []Intent
	err = s.tx(ctx, func(tx *sql.Tx) error {
		var batchLabel string // batch(first id), for every intent of the batch
		sameBatch := func(id int64) string {
			if batchLabel == "" {
				batchLabel = batch(id)
			}
			return batchLabel
		}
		for _, o := range offers {
			in, err := insertIntent(ctx, tx, fleet, o.OfferID, o.MachineID, req, now, label, sameBatch)
			if err != nil {
				return err
			}
			out = append(out, in)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: new intent batch (fleet %q, %d offers): %w", fleet, len(offers), err)
	}
	return out, nil
}

// IntentForInstance returns the intent that rented an instance carrying
// label on machineID: the intent of that label, or the one of the bulk
// create of that label on that machine. ErrNotFound when neither.
func (s *Store) IntentForInstance(ctx context.Context, label string, machineID int64) (Intent, error) {
	in, err := scanIntent(s.db.QueryRowContext(ctx, "SELECT "+intentCols+" FROM intents WHERE batch_label = ? AND machine_id = ?", label, machineID))
	if err == nil {
		return in, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Intent{}, fmt.Errorf("store: intent of batch %q on machine %d: %w", label, machineID, err)
	}
	return s.IntentByLabel(ctx, label)
}

// PendingIntents returns the intents whose outcome is unknown, oldest first.
// After a crash each must be looked up by label before anything is rented.
func (s *Store) PendingIntents(ctx context.Context) ([]Intent, error) {
	out, err := s.queryIntents(ctx, "WHERE state = ? ORDER BY id", IntentPending)
	if err != nil {
		return nil, fmt.Errorf("store: pending intents: %w", err)
	}
	return out, nil
}

// FleetIntents returns a fleet's intents in id order.
func (s *Store) FleetIntents(ctx context.Context, fleet string) ([]Intent, error) {
	out, err := s.queryIntents(ctx, "WHERE fleet = ? ORDER BY id", fleet)
	if err != nil {
		return nil, fmt.Errorf("store: intents of fleet %q: %w", fleet, err)
	}
	return out, nil
}

// resolveIntent marks the intent created with instanceID. An intent already
// created for a different instance is a conflict; for the same one it is a
// no-op, so replays after a crash are safe. A failed or abandoned intent may
// still resolve: its instance turned up after all.
func resolveIntent(ctx context.Context, tx *sql.Tx, id, instanceID int64, now time.Time) (Intent, error) {
	if instanceID <= 0 {
		return Intent{}, fmt.Errorf("intent %d: bad instance id %d", id, instanceID)
	}
	in, err := scanIntent(tx.QueryRowContext(ctx, "SELECT "+intentCols+" FROM intents WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Intent{}, fmt.Errorf("intent %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Intent{}, err
	}
	if in.State == IntentCreated {
		if in.InstanceID != instanceID {
			return Intent{}, fmt.Errorf("intent %d already resolved to instance %d, not %d: %w", id, in.InstanceID, instanceID, ErrConflict)
		}
		return in, nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE intents SET state = ?, instance_id = ?, error = '', updated_at = ? WHERE id = ?",
		IntentCreated, instanceID, fmtTime(now), id); err != nil {
		return Intent{}, err
	}
	in.State, in.InstanceID, in.Error, in.UpdatedAt = IntentCreated, instanceID, "", now.UTC()
	return in, nil
}

// ResolveIntent marks the intent created with the marketplace's instance id.
// Prefer RecordCreated, which also writes the instance row.
func (s *Store) ResolveIntent(ctx context.Context, id, instanceID int64, now time.Time) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := resolveIntent(ctx, tx, id, instanceID, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: resolve %w", err)
	}
	return nil
}

// FailIntent marks a pending intent failed with errText. Only call it once
// the label is known not to exist on the marketplace; a created intent gives
// ErrConflict.
func (s *Store) FailIntent(ctx context.Context, id int64, errText string, now time.Time) error {
	return s.finishIntent(ctx, id, IntentFailed, errText, now)
}

// AbandonIntent marks a pending intent abandoned (outcome unknown and given
// up on); reconciliation still adopts any instance carrying its label.
func (s *Store) AbandonIntent(ctx context.Context, id int64, reason string, now time.Time) error {
	return s.finishIntent(ctx, id, IntentAbandoned, reason, now)
}

func (s *Store) finishIntent(ctx context.Context, id int64, state, text string, now time.Time) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var cur string
		err := tx.QueryRowContext(ctx, "SELECT state FROM intents WHERE id = ?", id).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("intent %d: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if cur == IntentCreated {
			return fmt.Errorf("intent %d is already created, cannot mark it %s: %w", id, state, ErrConflict)
		}
		_, err = tx.ExecContext(ctx, "UPDATE intents SET state = ?, error = ?, updated_at = ? WHERE id = ?", state, text, fmtTime(now), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}
