package clock

import (
	"context"
	"sync"
	"time"
)

// Scaled runs at scale × the time of a wall clock:
// now = start + (wall.Now() − wallStart) × scale. A simulator shared with
// other processes runs on one, so that its market lives on between their
// requests; its sleepers wait d/scale of wall time.
type Scaled struct {
	mu        sync.Mutex
	start     time.Time
	wallStart time.Time
	scale     float64
	wall      Clock
}

// NewScaled builds a scaled clock that reads start at wall time
// wallStart. wall is the clock it scales (nil: Wall; tests pass a Manual);
// a scale <= 0 means 1.
func NewScaled(start, wallStart time.Time, scale float64, wall Clock) *Scaled {
	if scale <= 0 {
		scale = 1
	}
	if wall == nil {
		wall = Wall{}
	}
	return &Scaled{start: start, wallStart: wallStart, scale: scale, wall: wall}
}

// Now is the scaled time.
func (c *Scaled) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked(c.wall.Now())
}

func (c *Scaled) nowLocked(wall time.Time) time.Time {
	el := wall.Sub(c.wallStart)
	if el < 0 {
		el = 0
	}
	return c.start.Add(time.Duration(float64(el) * c.scale))
}

// Wall returns the current wall time and the scaled time at that instant.
func (c *Scaled) Wall() (wall, scaled time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.wall.Now()
	return w, c.nowLocked(w)
}

// Rebase makes the clock read t at wall instant wall, keeping its scale.
func (c *Scaled) Rebase(t, wall time.Time) {
	c.mu.Lock()
	c.start, c.wallStart = t, wall
	c.mu.Unlock()
}

// RebaseNow makes the clock read t now, keeping its scale.
func (c *Scaled) RebaseNow(t time.Time) {
	c.mu.Lock()
	c.start, c.wallStart = t, c.wall.Now()
	c.mu.Unlock()
}

// Scale is the clock's speed-up factor.
func (c *Scaled) Scale() float64 { return c.scale }

// Sleep waits d of scaled time, d/scale of the wall clock's, or until ctx
// ends.
func (c *Scaled) Sleep(ctx context.Context, d time.Duration) error {
	return c.wall.Sleep(ctx, time.Duration(float64(d)/c.scale))
}
