package clock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Virtual is a clock driven by its sleepers, like a discrete-event
// simulation: a sleeper waits until the clock reaches its wake-up time,
// and whenever the program has been quiet for a moment (every counted
// goroutine asleep, no request in flight) the clock jumps to the earliest
// wake-up time. Time passes only while the program waits, never because
// its own work was slow, so a simulated market gives the same answer on a
// busy machine as on an idle one.
type Virtual struct {
	mu      sync.Mutex
	now     time.Time
	active  int // requests in flight (see Transport)
	actors  int // goroutines that count (see Busy)
	waiters waiters
	lastAct time.Time // real time of the last sleeper or clock move
	// pace, when positive, caps the clock at pace × wall time between
	// jumps, so that a person can watch; it only adds waiting, so the
	// outcome stays the same.
	pace     float64
	lastMove time.Time
	// steady, with a pace, moves the clock at that pace whether or not
	// the program is quiet (SetSteady); anchorNow and anchorWall are
	// where the pace is counted from.
	steady     bool
	anchorNow  time.Time
	anchorWall time.Time
	// jump, when set, makes each move: the clock of a market served by
	// another process moves only when that market has reached the time.
	jump    func(ctx context.Context, to time.Time) (time.Time, error)
	done    chan struct{}
	stopped sync.Once
}

type waiter struct {
	at time.Time
	ch chan struct{}
}

// waiters are a clock's sleepers.
type waiters []*waiter

// wake closes the channels of the sleepers due at now and keeps the others.
func (ws *waiters) wake(now time.Time) {
	kept := (*ws)[:0]
	for _, w := range *ws {
		if w.at.After(now) {
			kept = append(kept, w)
		} else {
			close(w.ch)
		}
	}
	clear((*ws)[len(kept):])
	*ws = kept
}

// remove takes w out, a sleeper that stopped waiting.
func (ws *waiters) remove(w *waiter) {
	for i, x := range *ws {
		if x == w {
			*ws = append((*ws)[:i], (*ws)[i+1:]...)
			return
		}
	}
}

// quiet is how long every counted goroutine must have slept, with no
// request in flight, before the clock jumps.
const quiet = 200 * time.Microsecond

// stall is how long the clock waits for busy goroutines before it moves
// anyway: only a safety net against a goroutine it miscounts.
const stall = 10 * time.Second

// NewVirtual starts a virtual clock at start; Close stops its driver.
func NewVirtual(start time.Time) *Virtual {
	v := &Virtual{now: start, lastAct: time.Now(), done: make(chan struct{})}
	go v.drive()
	return v
}

// Now is the virtual time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// Advance moves the clock forward by d at once.
func (v *Virtual) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	v.mu.Lock()
	v.now = v.now.Add(d)
	v.lastAct = time.Now()
	v.mu.Unlock()
}

// Set moves the clock to t (a saved market resumes where it was).
func (v *Virtual) Set(t time.Time) {
	v.mu.Lock()
	v.now = t
	v.lastAct = time.Now()
	v.mu.Unlock()
}

// SetPace caps the clock at scale market seconds per wall second (0:
// no cap).
func (v *Virtual) SetPace(scale float64) {
	v.mu.Lock()
	v.pace = scale
	v.mu.Unlock()
}

// SetSteady, with a pace set, moves the clock at that pace from now on
// whether or not the program is quiet, as a scaled clock does: for a
// market whose machines run real processes, which take wall time
// whatever this program does meanwhile. A wake-up this computer made
// late is made up, so the pace holds on a busy computer too; the clock
// never runs ahead of it.
func (v *Virtual) SetSteady(on bool) {
	v.mu.Lock()
	v.steady, v.anchorNow, v.anchorWall = on, v.now, time.Now()
	v.mu.Unlock()
}

// SetJump makes every move of the clock go through jump, which returns
// once the time it was given (or a later one) has been reached elsewhere:
// a command's clock is then the local market's (see Shared), and moves
// only when the market has moved. A failed jump leaves the clock where it
// was; the next quiet moment tries again.
func (v *Virtual) SetJump(jump func(ctx context.Context, to time.Time) (time.Time, error)) {
	v.mu.Lock()
	v.jump = jump
	v.mu.Unlock()
}

// Busy counts the goroutines that work between sleeps: while fewer of
// them sleep than exist, one is working and the clock stands still.
func (v *Virtual) Busy(d int) {
	v.mu.Lock()
	v.actors += d
	v.lastAct = time.Now()
	v.mu.Unlock()
}

// InFlight counts requests to the market: the clock stands still while
// one is in flight, so a request takes none of the market's time however
// slow this machine is to send or answer it.
func (v *Virtual) InFlight(d int) {
	v.mu.Lock()
	v.active += d
	v.lastAct = time.Now()
	v.mu.Unlock()
}

// Close stops the clock's driver; sleepers get an error.
func (v *Virtual) Close() { v.stopped.Do(func() { close(v.done) }) }

// ErrClosed is what a sleeper on a closed virtual clock gets.
var ErrClosed = errors.New("virtual clock closed")

// Sleep waits d of virtual time or until ctx ends.
func (v *Virtual) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	v.mu.Lock()
	w := &waiter{at: v.now.Add(d), ch: make(chan struct{})}
	v.waiters = append(v.waiters, w)
	v.lastAct = time.Now()
	v.mu.Unlock()
	select {
	case <-w.ch:
		return ctx.Err()
	case <-ctx.Done():
		v.mu.Lock()
		v.waiters.remove(w)
		v.mu.Unlock()
		return ctx.Err()
	case <-v.done:
		return ErrClosed
	}
}

// jumpTo asks the clock's jump for next, with v.mu held on entry and on
// return (not during the call, which waits on another process).
func (v *Virtual) jumpTo(next time.Time) (time.Time, bool) {
	jump := v.jump
	v.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-v.done: // Close ends a jump that waits on a market
			cancel()
		case <-ctx.Done():
		}
	}()
	to, err := jump(ctx, next)
	cancel()
	v.mu.Lock()
	if err != nil {
		v.lastAct = time.Now() // not at once again: the market may be gone
		return time.Time{}, false
	}
	return to, true
}

// steadyTarget is where a steady clock may be by now, with v.mu held. A
// clock moved ahead of it (Advance, Set) counts its pace from there.
func (v *Virtual) steadyTarget() time.Time {
	t := v.anchorNow.Add(time.Duration(float64(time.Since(v.anchorWall)) * v.pace))
	if t.Before(v.now) {
		v.anchorNow, v.anchorWall = v.now, time.Now()
		return v.now
	}
	return t
}

func (v *Virtual) drive() {
	t := time.NewTicker(100 * time.Microsecond)
	defer t.Stop()
	for {
		select {
		case <-v.done:
			return
		case <-t.C:
		}
		v.mu.Lock()
		idle := time.Since(v.lastAct)
		settled := v.active == 0 && idle >= quiet && len(v.waiters) >= v.actors
		steady := v.steady && v.pace > 0
		if len(v.waiters) > 0 && (settled || idle >= stall || steady) {
			next := v.waiters[0].at
			for _, w := range v.waiters[1:] {
				if w.at.Before(next) {
					next = w.at
				}
			}
			if steady && next.After(v.steadyTarget()) {
				v.mu.Unlock()
				continue
			}
			if !steady && v.pace > 0 && time.Since(v.lastMove) < time.Duration(float64(next.Sub(v.now))/v.pace) {
				v.mu.Unlock()
				continue
			}
			if v.jump != nil {
				to, ok := v.jumpTo(next)
				if !ok {
					v.mu.Unlock()
					continue
				}
				next = to
			}
			if v.now.Before(next) {
				v.now = next
			}
			v.lastMove = time.Now()
			v.waiters.wake(v.now)
			v.lastAct = time.Now()
		}
		v.mu.Unlock()
	}
}
