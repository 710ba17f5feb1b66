package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// WaitOptions tunes WaitRunning.
type WaitOptions struct {
	// Timeout bounds the wait (default 30 min; loading can take long).
	Timeout time.Duration
	// OnSlow is called once when loading has taken over SlowLoading.
	OnSlow func(elapsed time.Duration)
	// UnknownFor is how long "unknown" (no host heartbeat) is tolerated
	// (default 5 min).
	UnknownFor time.Duration
}

// ErrWillNotRun: the instance reached a state that does not lead to
// running unaided (exited, offline, unknown for long).
var ErrWillNotRun = errors.New("instance will not reach running")

// WaitRunning polls one instance until it runs, recording what it sees.
// It fails on exited or offline, on unknown for longer than UnknownFor, and
// on Timeout. An auth failure ends the wait with ErrAuth and never counts as
// the instance being gone; neither does "not found" (only a listing
// proves that).
func (m *Manager) WaitRunning(ctx context.Context, id int64, opts WaitOptions) (store.Instance, error) {
	_, err := m.waitRunning(ctx, id, opts)
	rec, serr := m.S.Instance(ctx, id)
	if err != nil {
		return rec, err
	}
	return rec, serr
}

func (o *WaitOptions) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Minute
	}
	if o.UnknownFor <= 0 {
		o.UnknownFor = 5 * time.Minute
	}
}

// observe records one sighting of an instance: rates, state, ssh address.
func (m *Manager) observe(ctx context.Context, row provider.Instance, now time.Time) error {
	if err := m.refreshRates(ctx, row); err != nil {
		return err
	}
	if err := m.S.UpdateSeen(ctx, row.ID, row.Status(), sshHost(row), sshPort(row), provider.SSHURL(row), now); err != nil {
		return err
	}
	return m.recordBandwidth(ctx, now, row)
}

// waitState follows one instance towards running.
type waitState struct {
	start, unknownSince time.Time
	slowSaid            bool
}

// step judges one sighting: done when running; an error wrapping
// ErrWillNotRun when it will not get there unaided.
func (w *waitState) step(row provider.Instance, now time.Time, opts WaitOptions) (bool, error) {
	st := row.Status()
	if st != provider.StateUnknown {
		w.unknownSince = time.Time{}
	}
	switch st {
	case provider.StateRunning:
		return true, nil
	case provider.StateExited, provider.StateOffline:
		return false, fmt.Errorf("instance %d is %s (%s): %w", row.ID, st, row.StatusMsg, ErrWillNotRun)
	case provider.StateUnknown:
		if w.unknownSince.IsZero() {
			w.unknownSince = now
		}
		if now.Sub(w.unknownSince) >= opts.UnknownFor {
			return false, fmt.Errorf("instance %d has been unknown (no host heartbeat) for %s: %w",
				row.ID, now.Sub(w.unknownSince).Round(time.Second), ErrWillNotRun)
		}
	}
	if el := now.Sub(w.start); !w.slowSaid && el > SlowLoading && opts.OnSlow != nil {
		w.slowSaid = true
		opts.OnSlow(el)
	}
	return false, nil
}

func (m *Manager) waitRunning(ctx context.Context, id int64, opts WaitOptions) (provider.Instance, error) {
	opts.defaults()
	start := m.now()
	deadline := start.Add(opts.Timeout)
	ws := &waitState{start: start}
	var last provider.Instance
	var lastErr error
	for first := true; ; first = false {
		if !first {
			if !m.now().Before(deadline) {
				break
			}
			if err := m.sleep(ctx, m.pollEvery()); err != nil {
				return last, err
			}
		}
		row, err := m.P.ShowInstance(ctx, id)
		now := m.now()
		switch {
		case errors.Is(err, provider.ErrAuth):
			return last, fmt.Errorf("wait for instance %d: %w (the instance may still exist and bill)", id, err)
		case errors.Is(err, provider.ErrNotFound):
			// Young instances may not be shown yet; older ones are for a
			// listing (reconcile) to judge, not for us to forget.
			lastErr = err
			if in, serr := m.S.Instance(ctx, id); serr == nil && !m.young(in.CreatedAt, now) {
				return last, fmt.Errorf("wait for instance %d: %w: the marketplace does not show it (run reconcile)", id, err)
			}
			continue
		case err != nil:
			lastErr = err
			if !provider.Classify(err).Transient {
				return last, fmt.Errorf("wait for instance %d: %w", id, err)
			}
			continue
		}
		last, lastErr = row, nil
		if err := m.observe(ctx, row, now); err != nil {
			return last, fmt.Errorf("wait for instance %d: %w", id, err)
		}
		if done, err := ws.step(row, now, opts); done || err != nil {
			return row, err
		}
	}
	if lastErr != nil {
		return last, fmt.Errorf("instance %d not running after %s (last error: %v)", id, opts.Timeout, lastErr)
	}
	return last, fmt.Errorf("instance %d not running after %s (state %s)", id, opts.Timeout, stateName(last.Status()))
}

// WaitAllRunning waits for several instances at once with one listing per
// poll, so that each instance's start is recorded when it happens
// (sequential WaitRunning calls would see later instances start late and
// price their compute low). It returns each instance's outcome (nil:
// running); err is for the wait as a whole (auth failure, cancellation).
// An instance missing from complete listings past the grace period fails
// with "not listed"; reconcile, not this wait, marks it gone.
func (m *Manager) WaitAllRunning(ctx context.Context, ids []int64, opts WaitOptions) (map[int64]error, error) {
	opts.defaults()
	start := m.now()
	deadline := start.Add(opts.Timeout)
	out := make(map[int64]error, len(ids))
	states := make(map[int64]*waitState, len(ids))
	slow := opts.OnSlow
	slowSaid := false
	opts.OnSlow = func(el time.Duration) { // once for the whole group
		if !slowSaid && slow != nil {
			slowSaid = true
			slow(el)
		}
	}
	for _, id := range ids {
		states[id] = &waitState{start: start}
	}
	var lastErr error
	for first := true; len(states) > 0; first = false {
		if !first {
			if !m.now().Before(deadline) {
				break
			}
			if err := m.sleep(ctx, m.pollEvery()); err != nil {
				return out, err
			}
		}
		l, err := m.P.ListInstances(ctx)
		if err != nil {
			lastErr = err
			if !provider.Classify(err).Transient { // an auth failure included
				return out, fmt.Errorf("wait for instances: %w", err)
			}
			continue
		}
		now := m.now()
		rows := byID(l)
		for id, ws := range states {
			row, ok := rows[id]
			if !ok {
				if in, err := m.S.Instance(ctx, id); err == nil && !m.young(in.CreatedAt, now) {
					out[id] = fmt.Errorf("instance %d is not listed (run reconcile)", id)
					delete(states, id)
				}
				continue
			}
			if err := m.observe(ctx, row, now); err != nil {
				return out, fmt.Errorf("wait for instance %d: %w", id, err)
			}
			if done, err := ws.step(row, now, opts); done || err != nil {
				out[id] = err
				delete(states, id)
			}
		}
	}
	for id := range states {
		out[id] = fmt.Errorf("instance %d not running after %s (last error: %v)", id, opts.Timeout, lastErr)
	}
	return out, nil
}

// AwaitRunning is WaitRunning as rent waits: a note on slow when loading
// takes long, and an error that says the instance still bills.
func (m *Manager) AwaitRunning(ctx context.Context, id int64, timeout time.Duration, slow io.Writer) (store.Instance, error) {
	rec, err := m.WaitRunning(ctx, id, WaitOptions{
		Timeout: timeout,
		OnSlow: func(elapsed time.Duration) {
			fmt.Fprintf(slow, "instance %d is still loading after %s: large images on slow hosts can take long; Ctrl+C stops waiting (the instance stays and keeps billing storage; `vastfleet destroy %d` ends it)\n",
				id, elapsed.Round(time.Second), id)
		},
	})
	if err != nil {
		return rec, fmt.Errorf("%w; instance %d still exists and bills at least storage: `vastfleet destroy %d` ends it, `vastfleet ls` shows it", err, id, id)
	}
	return rec, nil
}
