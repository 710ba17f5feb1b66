// Package clock is time as vastfleet reads it: the marketplace's clock
// (wall time for vast.ai, the simulator's scaled or virtual time otherwise)
// behind one small interface that tells the time and waits on it. Every
// clock lives here (the remote simulator's in remoteclock, which needs the
// network); other packages take a Clock instead of calling time.Now or
// time.Sleep, so tests and the simulator can move time.
package clock

import (
	"context"
	"time"
)

// Clock tells the marketplace's time and waits on it.
type Clock interface {
	// Now is the clock's current time.
	Now() time.Time
	// Sleep waits until d of the clock's time has passed, or until ctx
	// ends, whichever is first, and then returns ctx's error, if any (a
	// clock that can stop may return its own error instead). A d <= 0
	// returns at once.
	Sleep(ctx context.Context, d time.Duration) error
}

var (
	_ Clock = Wall{}
	_ Clock = Fixed{}
	_ Clock = (*Manual)(nil)
	_ Clock = Stepped{}
	_ Clock = (*Scaled)(nil)
	_ Clock = (*Virtual)(nil)
)

// Wall is the machine's own clock.
type Wall struct{}

// Now is time.Now.
func (Wall) Now() time.Time { return time.Now() }

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

// Fixed is a clock stopped at one time: views of a recorded state read
// the state as of its newest record. Nothing moves it, so its Sleep waits
// wall time, as a wait with no marketplace to poll would.
type Fixed struct{ At time.Time }

// Now is the time the clock stopped at.
func (c Fixed) Now() time.Time { return c.At }

// Sleep waits d of wall time or until ctx ends.
func (Fixed) Sleep(ctx context.Context, d time.Duration) error { return Wall{}.Sleep(ctx, d) }

// The kinds of time a clock tells, as every surface names them.
const (
	// KindWall is the machine's own time: the real marketplace's.
	KindWall = "wall"
	// KindMarket is a simulated market's time, which runs ahead of the
	// wall while vastfleet waits on it.
	KindMarket = "market"
)

// Kind says which time c tells, so a surface that shows a time can say
// which it is: wall for the machine's own clock (vast.ai's), market for
// any clock a simulated market moves.
func Kind(c Clock) string {
	switch c.(type) {
	case Wall, *Wall, nil:
		return KindWall
	}
	return KindMarket
}
