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
	if len(pending) == 0 {
		return errors.Join(errs...)
	}
	if err := m.confirmGone(ctx, pending, map[int64]time.Time{}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// confirmGone polls complete listings until none of ids is listed, marking
// each gone as soon as a listing proves it, and re-sending destroy to the
// ones still listed. Absence proves a destroy only for an instance the
// marketplace acknowledged destroying, or one past the grace period: a
// young instance may simply not be listed yet.
func (m *Manager) confirmGone(ctx context.Context, ids []int64, acked map[int64]time.Time) error {
	deadline := m.now().Add(DestroyTimeout)
	var lastErr error
	// sent: a destroy the marketplace took since the last listing. Past
	// the deadline one more listing still confirms those (their gone time
	// is the destroy's, which only this process knows): a destroy that
	// went through on its last retry would otherwise be left to a later
	// reconcile, which dates it at the first request (a failed one) and
	// leaves out what the instance billed until the one that took.
	sent, final := false, false
	// The first listing finds our rows to destroy; the second, right after,
	// usually proves them gone; later ones are paced.
	for round := 0; ; round++ {
		if round > 1 {
			if m.now().After(deadline) {
				if !sent || final {
					break
				}
				final = true
			} else if err := m.sleep(ctx, m.pollEvery()); err != nil {
				lastErr = err
				break
			}
		}
		sent = false
		l, err := m.P.ListInstances(ctx)
		if err != nil {
			lastErr = err
			if errors.Is(err, provider.ErrAuth) {
				break
			}
			// No listing to check labels against: each instance not yet
			// sent a destroy is checked on its own, so it does not keep
			// billing while listings fail.
			m.destroyShown(ctx, ids, acked)
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
			known, kerr := m.S.Instance(ctx, id)
			if row, ok := listed[id]; ok && (kerr != nil || sameInstance(known, row)) {
				still = append(still, id)
				continue
			}
			// Not listed, or listed under another label: that id is some
			// other instance now (another data dir's on a shared
			// marketplace), and ours is not among the rows.
			if _, foreign := listed[id]; !foreign && acked[id].IsZero() && (kerr != nil || m.young(known.CreatedAt, now)) {
				still = append(still, id)
				continue
			}
			if err := m.S.MarkGone(ctx, id, goneAt(known, acked[id], now)); err != nil {
				return fmt.Errorf("instance %d is gone but the store could not record it: %w", id, err)
			}
		}
		ids = still
		if len(ids) == 0 {
			return nil
		}
		lastErr = fmt.Errorf("still listed")
		if final {
			break
		}
		// Destroy is sent only to rows the listing shows with our label.
		// The calls outlive a cancelled command (Ctrl+C): a destroy
		// recorded as requested but never sent would leave it to reconcile.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		for _, id := range ids {
			if _, ok := listed[id]; !ok {
				continue
			}
			at, err := m.destroyCall(dctx, id)
			if err == nil && acked[id].IsZero() {
				acked[id] = at // the marketplace stopped billing it here
			}
			sent = sent || err == nil
			if err != nil && !errors.Is(err, provider.ErrNotFound) {
				if errors.Is(err, provider.ErrAuth) {
					cancel()
					return fmt.Errorf("destroy %d: %w (the instance may still bill)", id, err)
				}
				m.log().Warn("destroy call failed; confirming by listing", "instance", id, "err", err)
			}
		}
		cancel()
	}
	return fmt.Errorf("%w for instances %v: they stay \"destroy requested\" (run reconcile to confirm): %w", ErrNotConfirmed, ids, lastErr)
}

// unwatched is the longest gap between the last listing that showed an
// instance and the one that shows it gone for which the process that
// destroyed it can be taken to have been watching (store.ChangedAt's
// window).
const unwatched = time.Minute

// goneAt is when an instance that a listing at now no longer shows
// stopped billing: when the marketplace acknowledged this process's
// destroy (acked); else, when vastfleet had asked for the destroy and
// nobody watched since (a process killed after sending it: it sends the
// destroy as soon as it records the request), the later of that request
// and the last listing that showed it; else now. Cost ends there.
func goneAt(known store.Instance, acked, now time.Time) time.Time {
	if !acked.IsZero() {
		if acked.After(now) {
			return now
		}
		return acked
	}
	if known.DestroyRequestedAt.IsZero() {
		return now
	}
	floor := known.DestroyRequestedAt
	if known.LastSeenAt.After(floor) {
		floor = known.LastSeenAt
	}
	if now.Sub(floor) > unwatched {
		return floor
	}
	return now
}

// Park stops one instance the caller has just seen listed under its own
// label (storage keeps billing) and records it as parked: the launch's
// primitive, which checks ownership by the listing it acts on instead of
// a show per instance.
func (m *Manager) Park(ctx context.Context, id int64) error {
	sent, err := m.stopCall(ctx, id)
	if err != nil {
		return err
	}
	return m.parked(ctx, id, sent)
}

// parked records a stop the marketplace has taken, its request sent at
// at. It stops billing compute then: the timeline gets the stop as it was
// made, not half a poll early or late when the next listing shows it
// (this process's own stops, right after a listing, would otherwise bill
// that half poll every time).
func (m *Manager) parked(ctx context.Context, id int64, at time.Time) error {
	if known, err := m.S.Instance(ctx, id); err == nil && known.Live() {
		if compute, _ := provider.Bills(known.State); compute {
			if err := m.S.UpdateSeenAfter(ctx, id, provider.StateStopped, known.SSHHost, known.SSHPort, "", at, at); err != nil {
				return err
			}
		}
	}
	return m.S.SetWanted(ctx, id, store.WantParked)
}

// stopCall stops instance id and says when the marketplace took the stop:
// when its request was sent, where the client can tell
// (provider.SentTimer), else when the answer came.
func (m *Manager) stopCall(ctx context.Context, id int64) (time.Time, error) {
	if t, ok := m.P.(provider.SentTimer); ok {
		return m.sentAt(t.StopInstanceSent(ctx, id))
	}
	err := m.P.StopInstance(ctx, id)
	return m.now(), err
}

// destroyCall is stopCall for a destroy: when billing ended.
// The time is remembered (DestroySent).
func (m *Manager) destroyCall(ctx context.Context, id int64) (time.Time, error) {
	var at time.Time
	var err error
	if t, ok := m.P.(provider.SentTimer); ok {
		at, err = m.sentAt(t.DestroyInstanceSent(ctx, id))
	} else {
		err = m.P.DestroyInstance(ctx, id)
		at = m.now()
	}
	if err == nil {
		m.destroySent(id, at)
	}
	return at, err
}

// sentAt is a SentTimer's answer, on this manager's clock: a send time
// that is missing or later than now (a client on another clock) is now.
func (m *Manager) sentAt(sent time.Time, err error) (time.Time, error) {
	now := m.now()
	if sent.IsZero() || sent.After(now) {
		sent = now
	}
	return sent, err
}

// Release starts one parked instance the caller has just seen listed under
// its own label, and records it as meant to run.
func (m *Manager) Release(ctx context.Context, id int64) error {
	if err := m.P.StartInstance(ctx, id); err != nil {
		return err
	}
	return m.S.SetWanted(ctx, id, store.WantRunning)
}

// ReleaseAll starts parked instances the caller has just seen listed under
// its own label, as Release does, but many in one call where the
// marketplace takes bulk starts (provider.BulkStateChanger): at vast's
// one start a second, 300 single starts take five minutes. It reports
// whether it could, and each id's error (nil: started and recorded).
func (m *Manager) ReleaseAll(ctx context.Context, ids []int64) (map[int64]error, bool) {
	return m.setAll(ctx, ids, true)
}

// ParkAll is Park for many instances in bulk calls, as ReleaseAll.
func (m *Manager) ParkAll(ctx context.Context, ids []int64) (map[int64]error, bool) {
	return m.setAll(ctx, ids, false)
}

func (m *Manager) setAll(ctx context.Context, ids []int64, running bool) (map[int64]error, bool) {
	bulk, ok := m.P.(provider.BulkStateChanger)
	if !ok {
		return nil, false
	}
	verb := "start"
	if !running {
		verb = "stop"
	}
	out := make(map[int64]error, len(ids))
	failed, err := bulk.SetStates(ctx, ids, running)
	for _, id := range failed {
		out[id] = fmt.Errorf("the marketplace did not %s instance %d", verb, id)
		if err != nil {
			out[id] = err
		}
	}
	for _, id := range ids {
		if _, bad := out[id]; bad {
			continue
		}
		if running {
			out[id] = m.S.SetWanted(ctx, id, store.WantRunning)
		} else {
			out[id] = m.parked(ctx, id, m.now())
		}
	}
	return out, true
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
		act, verb := m.Park, "stop"
		if run {
			act, verb = m.Release, "start"
		}
		if row, err := m.P.ShowInstance(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("%s %d: checking it is ours first: %w", verb, id, err))
			continue
		} else if !sameInstance(in, row) {
			errs = append(errs, fmt.Errorf("%s %d: the marketplace's instance %d carries label %q, not this store's %q: not touching it", verb, id, id, row.LabelText(), in.Label))
			continue
		}
		if err := act(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("%s %d: %w", verb, id, err))
			continue
		}
		// Record the transition as of the call, so the cost timeline has it
		// at the time it happened rather than at the next poll.
		if row, err := m.P.ShowInstance(ctx, id); err == nil {
			if err := m.S.UpdateSeen(ctx, id, row.Status(), sshHost(row), sshPort(row), provider.SSHURL(row), m.now()); err != nil {
				errs = append(errs, fmt.Errorf("instance %d: %w", id, err))
			} else if err := m.recordBandwidth(ctx, m.now(), row); err != nil {
				errs = append(errs, fmt.Errorf("instance %d: %w", id, err))
			}
		}
	}
	return errors.Join(errs...)
}

// destroyShown sends destroy to each of ids not yet acknowledged whose
// own row (show instance) carries our label.
func (m *Manager) destroyShown(ctx context.Context, ids []int64, acked map[int64]time.Time) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	for _, id := range ids {
		if !acked[id].IsZero() {
			continue
		}
		known, err := m.S.Instance(ctx, id)
		if err != nil {
			continue
		}
		row, err := m.P.ShowInstance(dctx, id)
		if err != nil || !sameInstance(known, row) {
			continue
		}
		if sent, err := m.destroyCall(dctx, id); err == nil {
			acked[id] = sent
		}
	}
}

// sameInstance reports whether the marketplace's row is the instance the
// store knows by that id. Ids are the marketplace's, not ours: another data
// dir on a shared marketplace, or a simulator reset, can hand the same id
// to someone else's instance, and only the label (store id, fleet, intent)
// tells them apart. An instance the store holds without a label (adopted
// by hand) is taken at its id.
func sameInstance(known store.Instance, row provider.Instance) bool {
	return known.Label == "" || row.LabelText() == known.Label
}
