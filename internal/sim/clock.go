package sim

import (
	"github.com/vastfleet/vastfleet/internal/clock"
	"sync"
	"time"
)

// Clock is the simulator's only source of time. Lifecycle progress and
// billing are computed lazily from it whenever state is observed, so the
// simulator needs no background goroutines.
type Clock = clock.Clock

// ManualClock only moves when told to; tests use it.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock starts a manual clock at start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (a negative d is ignored: sim time
// never goes backwards).
func (c *ManualClock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// ScaledClock runs sim time at scale × wall time:
// sim = start + (wallNow() − wallStart) × scale.
type ScaledClock struct {
	mu        sync.Mutex
	start     time.Time
	wallStart time.Time
	scale     float64
	wallNow   func() time.Time
}

// NewScaledClock builds a scaled clock. wallNow is injected (usually
// time.Now, passed in by the command that wires the simulator).
func NewScaledClock(start, wallStart time.Time, scale float64, wallNow func() time.Time) *ScaledClock {
	if scale <= 0 {
		scale = 1
	}
	return &ScaledClock{start: start, wallStart: wallStart, scale: scale, wallNow: wallNow}
}

// Now returns the sim time.
func (c *ScaledClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked(c.wallNow())
}

func (c *ScaledClock) nowLocked(wall time.Time) time.Time {
	el := wall.Sub(c.wallStart)
	if el < 0 {
		el = 0
	}
	return c.start.Add(time.Duration(float64(el) * c.scale))
}

// Wall returns the current wall time and the sim time at that instant.
func (c *ScaledClock) Wall() (wall, sim time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.wallNow()
	return w, c.nowLocked(w)
}

// Rebase makes the clock read sim at wall instant wall, keeping its scale.
func (c *ScaledClock) Rebase(sim, wall time.Time) {
	c.mu.Lock()
	c.start, c.wallStart = sim, wall
	c.mu.Unlock()
}

// Scale is the clock's speed-up factor.
func (c *ScaledClock) Scale() float64 { return c.scale }
