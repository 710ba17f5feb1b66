package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// DestroyTimeout bounds how long Destroy waits for listings to confirm.
const DestroyTimeout = 5 * time.Minute

// ErrNotConfirmed: a destroy was sent but no complete listing has shown the
// instance gone yet. The store keeps it live ("destroy requested") and
// reconcile confirms it later.
var ErrNotConfirmed = errors.New("destroy not confirmed")

// Destroy destroys instances and returns only once complete listings show
// them gone; only then does the store mark them gone. When listings fail, the
// instances stay "destroy requested" and the error says so.
func (m *Manager) Destroy(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	now := m.now()
	var errs []error
	pending := make([]int64, 0, len(ids))
	for _, id := range ids {
		if err := m.S.RequestDestroy(ctx, id, now); err != nil {
			errs = append(errs, fmt.Errorf("instance %d: %w", id, err))
			continue
		}
		pending = append(pending, id)
	}
	// The destroy calls outlive a cancelled command (Ctrl+C): a destroy
	// recorded as requested but never sent would leave it to reconcile.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	acked := map[int64]bool{}
	for _, id := range pending {
		// ErrNotFound is fine: the listing below decides.
		err := m.P.DestroyInstance(dctx, id)
		acked[id] = err == nil
		if err != nil && !errors.Is(err, provider.ErrNotFound) {
			if errors.Is(err, provider.ErrAuth) {
				return errors.Join(append(errs, fmt.Errorf("destroy %d: %w (the instance may still bill)", id, err))...)
			}
			m.log().Warn("destroy call failed; confirming by listing", "instance", id, "err", err)
		}
	}
	if len(pending) == 0 {
		return errors.Join(errs...)
	}
	if err := m.confirmGone(ctx, pending, acked); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// confirmGone polls complete listings until none of ids is listed, marking
// each gone as soon as a listing proves it, and re-sending destroy to the
// ones still listed. Absence proves a destroy only for an instance the
// marketplace acknowledged destroying, or one past the grace period: a
// young instance may simply not be listed yet.
func (m *Manager) confirmGone(ctx context.Context, ids []int64, acked map[int64]bool) error {
	deadline := m.now().Add(DestroyTimeout)
	var lastErr error
	for first := true; ; first = false {
		if !first {
			if m.now().After(deadline) {
				break
			}
			if err := m.sleep(ctx, m.pollEvery()); err != nil {
				lastErr = err
				break
			}
		}
		l, err := m.P.ListInstances(ctx)
		if err != nil {
			lastErr = err
			if errors.Is(err, provider.ErrAuth) {
				break
			}
			continue
		}
		if l.Total != len(l.Instances) {
			lastErr = provider.ErrIncompleteListing
			continue
		}
		listed := byID(l)
		now := m.now()
		var still []int64
		for _, id := range ids {
			if _, ok := listed[id]; ok {
				still = append(still, id)
				continue
			}
			if !acked[id] {
				if in, err := m.S.Instance(ctx, id); err != nil || now.Sub(in.CreatedAt) < m.grace() {
					still = append(still, id)
					continue
				}
			}
			if err := m.S.MarkGone(ctx, id, now); err != nil {
				return fmt.Errorf("instance %d is gone but the store could not record it: %w", id, err)
			}
		}
		ids = still
		if len(ids) == 0 {
			return nil
		}
		lastErr = fmt.Errorf("still listed")
		for _, id := range ids {
			if err := m.P.DestroyInstance(ctx, id); err != nil && !errors.Is(err, provider.ErrNotFound) {
				m.log().Warn("re-sent destroy failed", "instance", id, "err", err)
			}
		}
	}
	return fmt.Errorf("%w for instances %v: they stay \"destroy requested\" (run reconcile to confirm): %w", ErrNotConfirmed, ids, lastErr)
}

// Stop stops instances (storage keeps billing) and records them as parked.
func (m *Manager) Stop(ctx context.Context, ids []int64) error {
	return m.setRunning(ctx, ids, false)
}

// Start starts stopped instances again.
func (m *Manager) Start(ctx context.Context, ids []int64) error {
	return m.setRunning(ctx, ids, true)
}

func (m *Manager) setRunning(ctx context.Context, ids []int64, run bool) error {
	var errs []error
	for _, id := range ids {
		in, err := m.S.Instance(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("instance %d: %w", id, err))
			continue
		}
		if !in.GoneAt.IsZero() || in.Wanted == store.WantDestroy {
			errs = append(errs, fmt.Errorf("instance %d is destroyed or being destroyed", id))
			continue
		}
		wanted, call, verb := store.WantParked, m.P.StopInstance, "stop"
		if run {
			wanted, call, verb = store.WantRunning, m.P.StartInstance, "start"
		}
		if err := call(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("%s %d: %w", verb, id, err))
			continue
		}
		if err := m.S.SetWanted(ctx, id, wanted); err != nil {
			errs = append(errs, fmt.Errorf("instance %d: %w", id, err))
			continue
		}
		// Record the transition as of the call, so the cost timeline has it
		// at the time it happened rather than at the next poll.
		if row, err := m.P.ShowInstance(ctx, id); err == nil {
			if err := m.S.UpdateSeen(ctx, id, row.Status(), sshHost(row), sshPort(row), m.now()); err != nil {
				errs = append(errs, fmt.Errorf("instance %d: %w", id, err))
			}
		}
	}
	return errors.Join(errs...)
}
