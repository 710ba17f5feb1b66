// Package clock is time as vastfleet reads it: the marketplace's clock
// (wall time for vast.ai, the simulator's virtual time otherwise) behind one
// small interface, and a sleep that ends with its context.
package clock

import (
	"context"
	"time"
)

// Clock tells the marketplace's time. Packages that decide on time take
// one instead of calling time.Now, so tests and the simulator can move it.
type Clock interface{ Now() time.Time }

// Wall is the machine's own clock.
type Wall struct{}

// Now is time.Now.
func (Wall) Now() time.Time { return time.Now() }

// Sleep waits d of wall time or until ctx ends: Wall's Sleep.
func Sleep(ctx context.Context, d time.Duration) error { return Wall{}.Sleep(ctx, d) }

// Sleep waits d of wall time or until ctx ends, whichever is first, and
// then returns ctx's error, if any.
func (Wall) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
