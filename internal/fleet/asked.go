package fleet

import (
	"context"
	"errors"
	"fmt"

	"github.com/vastfleet/vastfleet/internal/store"
)

// ErrDeclined: the user declined to destroy every instance.
var ErrDeclined = errors.New("declined")

// DestroyRequest is destroy as asked: the instances given, or All live
// ones (of Fleet), with the checks that come first.
type DestroyRequest struct {
	IDs   []int64
	All   bool
	Fleet string
	// Known refuses given ids the store does not track (not with All).
	Known func(ctx context.Context, ids []int64) error
	// Confirm asks before All destroys n instances.
	Confirm func(n int) bool
	// Guard checks the instances' results before the destroy; nil checks
	// nothing.
	Guard func(ctx context.Context, ids []int64) error
}

// DestroyAsked destroys what r asks for on a store brought up to date
// with the marketplace, and returns the ids destroyed: none when All found
// nothing live.
func (m *Manager) DestroyAsked(ctx context.Context, r DestroyRequest) ([]int64, error) {
	ids := r.IDs
	if _, err := m.Reconcile(ctx, ReconcileOptions{}); err != nil {
		return nil, fmt.Errorf("reconcile before destroy: %w", err)
	}
	if r.All {
		live, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: r.Fleet})
		if err != nil {
			return nil, err
		}
		for _, in := range live {
			ids = append(ids, in.ID)
		}
		if len(ids) == 0 {
			return nil, nil
		}
		if !r.Confirm(len(ids)) {
			return nil, ErrDeclined
		}
	} else if err := r.Known(ctx, ids); err != nil {
		return nil, err
	}
	if r.Guard != nil {
		if err := r.Guard(ctx, ids); err != nil {
			return nil, err
		}
		// Checking reached into every node, which takes a while: what
		// changed meanwhile (an outbid, a host gone) is dated by a listing
		// taken now, not counted as running until the destroy.
		if _, err := m.Reconcile(ctx, ReconcileOptions{}); err != nil {
			return nil, fmt.Errorf("reconcile before destroy: %w", err)
		}
	}
	return ids, m.Destroy(ctx, ids)
}

// StopOrStart stops (verb "stop") or starts ids on a store brought up to
// date with the marketplace, once known has accepted them.
func (m *Manager) StopOrStart(ctx context.Context, verb string, ids []int64, known func(context.Context, []int64) error) error {
	if _, err := m.Reconcile(ctx, ReconcileOptions{}); err != nil {
		return fmt.Errorf("reconcile before %s: %w", verb, err)
	}
	if err := known(ctx, ids); err != nil {
		return err
	}
	if verb == "stop" {
		return m.Stop(ctx, ids)
	}
	return m.Start(ctx, ids)
}
