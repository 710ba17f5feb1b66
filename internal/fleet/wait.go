package fleet

import (
	"context"
	"errors"
	"fmt"
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

func (m *Manager) waitRunning(ctx context.Context, id int64, opts WaitOptions) (provider.Instance, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Minute
	}
	if opts.UnknownFor <= 0 {
		opts.UnknownFor = 5 * time.Minute
	}
	start := m.now()
	deadline := start.Add(opts.Timeout)
	slowSaid := false
	var unknownSince time.Time
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
			if in, serr := m.S.Instance(ctx, id); serr == nil && now.Sub(in.CreatedAt) >= m.grace() {
				return last, fmt.Errorf("wait for instance %d: %w: the marketplace does not show it (run reconcile)", id, err)
			}
			continue
		case err != nil:
			lastErr = err
			if !provider.Transient(err) {
				return last, fmt.Errorf("wait for instance %d: %w", id, err)
			}
			continue
		}
		last, lastErr = row, nil
		if err := m.refreshRates(ctx, row); err != nil {
			return last, fmt.Errorf("wait for instance %d: %w", id, err)
		}
		if err := m.S.UpdateSeen(ctx, id, row.Status(), row.SSHHost, row.SSHPort, now); err != nil {
			return last, fmt.Errorf("wait for instance %d: %w", id, err)
		}
		st := row.Status()
		if st != provider.StateUnknown {
			unknownSince = time.Time{}
		}
		switch st {
		case provider.StateRunning:
			return row, nil
		case provider.StateExited, provider.StateOffline:
			return row, fmt.Errorf("instance %d is %s (%s): %w", id, st, row.StatusMsg, ErrWillNotRun)
		case provider.StateUnknown:
			if unknownSince.IsZero() {
				unknownSince = now
			}
			if now.Sub(unknownSince) >= opts.UnknownFor {
				return row, fmt.Errorf("instance %d has been unknown (no host heartbeat) for %s: %w", id, now.Sub(unknownSince).Round(time.Second), ErrWillNotRun)
			}
		}
		if el := now.Sub(start); !slowSaid && el > SlowLoading && opts.OnSlow != nil {
			slowSaid = true
			opts.OnSlow(el)
		}
	}
	if lastErr != nil {
		return last, fmt.Errorf("instance %d not running after %s (last error: %v)", id, opts.Timeout, lastErr)
	}
	return last, fmt.Errorf("instance %d not running after %s (state %s)", id, opts.Timeout, stateName(last.Status()))
}
