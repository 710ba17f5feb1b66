package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// AdoptIntent records row, created under this store's intent but never
// recorded (a crash, a lost create response), as the intent's instance in
// the intent's fleet: reconcile's and the launch's one way to take such a
// rental in.
func (m *Manager) AdoptIntent(ctx context.Context, intent store.Intent, row provider.Instance, now time.Time) error {
	m.warnClamped(row, now)
	rec := recordFromRow(row, intent, intent.Fleet, now)
	if err := m.S.RecordCreated(ctx, intent.ID, rec, now); err != nil {
		return fmt.Errorf("adopt instance %d: %w", row.ID, err)
	}
	m.seen(ctx, row)
	return nil
}

// OwnFleet picks, for ReconcileOptions.Adopt, the orphans a store that
// lost its recent writes should take back into fleetName: labelled by this
// store (storeID) for that fleet, under an intent the store no longer
// has. Another store's instances are never picked.
func OwnFleet(storeID, fleetName string) func(Orphan) bool {
	return func(o Orphan) bool {
		l, ok := ParseLabel(o.Instance.LabelText())
		return ok && !o.Foreign && l.Store == storeID && l.Fleet == fleetName
	}
}

// adopt records an orphan as an instance this store tracks, under the
// fleet its label names, with no intent: the intent that rented it lives
// in a store that was lost (or in another data dir that gave it up). From
// then on ls, cost and destroy treat it as any other instance.
func (m *Manager) adopt(ctx context.Context, o Orphan) (Change, error) {
	row := o.Instance
	label, ok := ParseLabel(row.LabelText())
	if !ok {
		return Change{}, fmt.Errorf("instance %d: label %q is not vastfleet's", row.ID, row.LabelText())
	}
	if err := m.ensureFleet(ctx, label.Fleet); err != nil {
		return Change{}, fmt.Errorf("adopt instance %d: fleet %s: %w", row.ID, label.Fleet, err)
	}
	now := m.now()
	rec := recordFromRow(row, store.Intent{Label: row.LabelText()}, label.Fleet, now)
	rec.SSHURL = provider.SSHURL(row)
	if err := m.S.UpsertInstance(ctx, rec, now); err != nil {
		return Change{}, fmt.Errorf("adopt instance %d: %w", row.ID, err)
	}
	m.seen(ctx, row)
	return Change{Kind: ChangeAdopted, Instance: row.ID,
		Detail: fmt.Sprintf("tracked again in fleet %s (label of store %s, intent %d)", label.Fleet, label.Store, label.Intent)}, nil
}
