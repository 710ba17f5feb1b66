package clock

import (
	"context"
	"sync"
	"time"
)

// Manual is a clock that moves only when told to (Advance, Set): tests,
// and a simulator served with a manual clock, move it. A sleeper on it
// waits until the clock has been moved to or past its wake-up time.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	waiters waiters
}

// NewManual starts a manual clock at start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now is the clock's time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (a d <= 0 is ignored: the clock
// never goes backwards by Advance) and wakes the sleepers it passed.
func (c *Manual) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.waiters.wake(c.now)
	c.mu.Unlock()
}

// Set moves the clock to t and wakes the sleepers it passed.
func (c *Manual) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.waiters.wake(c.now)
	c.mu.Unlock()
}

// Sleep waits until the clock has been moved d past its time now, or until
// ctx ends.
func (c *Manual) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	c.mu.Lock()
	w := &waiter{at: c.now.Add(d), ch: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		c.waiters.remove(w)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// Stepped is a manual clock moved by its own sleepers: Sleep(d) advances
// M by d at once. A test whose one goroutine both waits and looks (a
// conformance suite polling a simulator) drives the market's time with it.
type Stepped struct{ M *Manual }

// Now is M's time.
func (s Stepped) Now() time.Time { return s.M.Now() }

// Sleep advances M by d and returns ctx's error, if any.
func (s Stepped) Sleep(ctx context.Context, d time.Duration) error {
	s.M.Advance(d)
	return ctx.Err()
}
