package clock

import (
	"context"
	"sync"
	"time"
)

// Shared is the clock of a market that outlives the commands using it
// (the local simulator): between commands it runs at pace × wall time, as
// a real market does; while any command holds a session on it, it moves
// only when every session waits, to the earliest wake-up, as Virtual
// does. So a command never loses market time to its own slowness, and a
// person who reads its output between commands is billed for the minutes
// they took, not for hours.
type Shared struct {
	v *Virtual

	mu       sync.Mutex
	pace     float64
	sessions int
	wallBase time.Time // wall time up to which idle motion was applied
}

var _ Clock = (*Shared)(nil)

// NewShared starts a shared clock at start; pace <= 0 means 1. Close
// stops it.
func NewShared(start time.Time, pace float64) *Shared {
	if pace <= 0 {
		pace = 1
	}
	return &Shared{v: NewVirtual(start), pace: pace, wallBase: time.Now()}
}

// idleLocked moves the clock by the wall time since the last look when
// no session is open.
func (s *Shared) idleLocked() {
	w := time.Now()
	if s.sessions == 0 {
		s.v.Advance(time.Duration(float64(w.Sub(s.wallBase)) * s.pace))
	}
	s.wallBase = w
}

// Now is the market's time.
func (s *Shared) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idleLocked()
	return s.v.Now()
}

// Pace is the market seconds per wall second between sessions.
func (s *Shared) Pace() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pace
}

// Sessions is how many sessions are open.
func (s *Shared) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

// Open starts a session: the clock now moves only when it (and every
// other) waits in Sleep. The returned func ends it; call it once.
func (s *Shared) Open() (end func()) {
	s.mu.Lock()
	s.idleLocked()
	s.sessions++
	s.v.Busy(1)
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.sessions--
			s.v.Busy(-1)
			s.wallBase = time.Now()
			s.mu.Unlock()
		})
	}
}

// Sleep waits d of market time. A session's wait moves the clock (see
// Open); with no session open it waits d/pace of wall time, as the clock
// then runs.
func (s *Shared) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	n, pace := s.sessions, s.pace
	s.mu.Unlock()
	if n == 0 {
		return Wall{}.Sleep(ctx, time.Duration(float64(d)/pace))
	}
	return s.v.Sleep(ctx, d)
}

// Rebase makes a reopened market resume as if it had run at its pace
// since it last read t at wall time wall.
func (s *Shared) Rebase(t, wall time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el := max(time.Since(wall), 0)
	s.v.Set(t.Add(time.Duration(float64(el) * s.pace)))
	s.wallBase = time.Now()
}

// Close stops the clock; sleepers get ErrClosed.
func (s *Shared) Close() { s.v.Close() }

// Set moves the clock to t (a reset market starts after the old one's
// last time).
func (s *Shared) Set(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v.Set(t)
	s.wallBase = time.Now()
}
