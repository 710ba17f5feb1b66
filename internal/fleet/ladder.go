package fleet

import (
	"fmt"
	"time"
)

// The teardown ladder: what happens to an instance nobody tears down.
// A running instance is stopped when it reaches its maximum lifetime
// (counted from boot, as GCP's max-run-duration) or has sat idle, CPU and
// GPU below a share, for long enough; a stopped one, which still bills
// storage, is destroyed once it has been stopped for long enough. The
// policy here is pure: the caller says where the instance stands, and
// Next says what comes next and when, for `reap` to apply and `ls` to show.

// Ladder is a fleet's teardown ladder; a zero field is a rung not set.
type Ladder struct {
	// MaxLifetime stops the instance this long after it first ran.
	MaxLifetime time.Duration `json:"max_lifetime,omitempty"`
	// IdleAfter stops the instance once CPU and GPU have both stayed
	// below IdleBelow percent for this long.
	IdleAfter time.Duration `json:"idle_after,omitempty"`
	IdleBelow float64       `json:"idle_below,omitempty"`
	// StoppedFor destroys the instance once it has been stopped this long.
	StoppedFor time.Duration `json:"stopped_for,omitempty"`
}

// The ladder's actions.
const (
	LadderStop    = ReapStop
	LadderDestroy = ReapDestroy
)

// Validate refuses a ladder that cannot mean what it says.
func (l Ladder) Validate() error {
	switch {
	case l.MaxLifetime < 0 || l.IdleAfter < 0 || l.StoppedFor < 0:
		return fmt.Errorf("teardown ladder: durations must be positive (0: rung not set)")
	case l.IdleBelow < 0 || l.IdleBelow > 100:
		return fmt.Errorf("teardown ladder: idle below %g%%: want a share of CPU and GPU between 0 and 100", l.IdleBelow)
	case (l.IdleAfter > 0) != (l.IdleBelow > 0):
		return fmt.Errorf("teardown ladder: idle needs both after (a duration) and below (a percentage)")
	}
	return nil
}

// IsZero reports whether no rung is set.
func (l Ladder) IsZero() bool { return l == Ladder{} }

// LadderState is where an instance stands, for the ladder.
type LadderState struct {
	// Booted is when it first ran (zero: never ran; no running rung
	// applies before it boots).
	Booted time.Time
	// Stopped is set while it is stopped, from StoppedSince.
	Stopped      bool
	StoppedSince time.Time
	// IdleSince is the start of the current stretch of CPU and GPU below
	// the ladder's share (IdleSince of its usage); zero: not idle, or not
	// known.
	IdleSince time.Time
}

// Step is the next rung for an instance: Action at At, for Reason. A zero
// Step (Action "") means no rung is set for where it stands.
type Step struct {
	Action string    `json:"action"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// Due reports whether the step has come at now.
func (s Step) Due(now time.Time) bool { return s.Action != "" && !now.Before(s.At) }

// Next is the instance's next rung: for a stopped instance its destroy,
// for a running one the earlier of its lifetime and its idle stop.
func (l Ladder) Next(s LadderState) Step {
	if s.Stopped {
		if l.StoppedFor <= 0 || s.StoppedSince.IsZero() {
			return Step{}
		}
		return Step{Action: LadderDestroy, At: s.StoppedSince.Add(l.StoppedFor), Reason: fmt.Sprintf("stopped for %s", l.StoppedFor)}
	}
	if s.Booted.IsZero() {
		return Step{}
	}
	var next Step
	if l.MaxLifetime > 0 {
		next = Step{Action: LadderStop, At: s.Booted.Add(l.MaxLifetime), Reason: fmt.Sprintf("max lifetime %s", l.MaxLifetime)}
	}
	if l.IdleAfter > 0 && !s.IdleSince.IsZero() {
		at := s.IdleSince.Add(l.IdleAfter)
		if next.Action == "" || at.Before(next.At) {
			next = Step{Action: LadderStop, At: at, Reason: fmt.Sprintf("idle (CPU and GPU below %g%%) for %s", l.IdleBelow, l.IdleAfter)}
		}
	}
	return next
}

// Usage is one sample of an instance's load, in percent of its capacity
// (CPU: of all its cores; GPU: the mean over its GPUs, absent without).
type Usage struct {
	At     time.Time
	CPU    float64
	GPU    float64
	HasGPU bool
}

// IdleSince is the start of the stretch of samples, up to the last, in
// which CPU and GPU both stayed below below percent; zero when the last
// sample is busy or there is none. Samples are in time order.
func IdleSince(samples []Usage, below float64) time.Time {
	var since time.Time
	for _, u := range samples {
		if u.CPU < below && (!u.HasGPU || u.GPU < below) {
			if since.IsZero() {
				since = u.At
			}
		} else {
			since = time.Time{}
		}
	}
	return since
}
