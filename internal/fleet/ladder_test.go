package fleet

import (
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/store"
)

func TestLadderNext(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	h := time.Hour
	full := Ladder{MaxLifetime: 8 * h, IdleAfter: 30 * time.Minute, IdleBelow: 5, StoppedFor: 24 * h}
	cases := []struct {
		name   string
		l      Ladder
		s      LadderState
		action string
		at     time.Time
	}{
		{"no rungs", Ladder{}, LadderState{Booted: t0}, "", time.Time{}},
		{"not booted: nothing yet", full, LadderState{}, "", time.Time{}},
		{"lifetime from boot", full, LadderState{Booted: t0}, LadderStop, t0.Add(8 * h)},
		{"idle sooner than the lifetime", full, LadderState{Booted: t0, IdleSince: t0.Add(h)}, LadderStop, t0.Add(h + 30*time.Minute)},
		{"lifetime sooner than idle", full, LadderState{Booted: t0, IdleSince: t0.Add(8 * h)}, LadderStop, t0.Add(8 * h)},
		{"idle only", Ladder{IdleAfter: time.Hour, IdleBelow: 5}, LadderState{Booted: t0, IdleSince: t0.Add(2 * h)}, LadderStop, t0.Add(3 * h)},
		{"idle only, busy", Ladder{IdleAfter: time.Hour, IdleBelow: 5}, LadderState{Booted: t0}, "", time.Time{}},
		{"stopped: destroy after stopped_for", full, LadderState{Booted: t0, Stopped: true, StoppedSince: t0.Add(2 * h)}, LadderDestroy, t0.Add(26 * h)},
		{"stopped without stopped_for stays", Ladder{MaxLifetime: h}, LadderState{Booted: t0, Stopped: true, StoppedSince: t0}, "", time.Time{}},
	}
	for _, c := range cases {
		got := c.l.Next(c.s)
		if got.Action != c.action || !got.At.Equal(c.at) || (c.action != "" && got.Reason == "") {
			t.Errorf("%s: %+v, want %s at %v", c.name, got, c.action, c.at)
		}
	}
	st := full.Next(LadderState{Booted: t0})
	if st.Due(t0.Add(8*h-time.Second)) || !st.Due(t0.Add(8*h)) {
		t.Errorf("due: a step is due from its time on")
	}
	if (Step{}).Due(t0.Add(1000 * h)) {
		t.Errorf("no step is never due")
	}
}

func TestLadderValidate(t *testing.T) {
	t.Parallel()
	ok := []Ladder{{}, {MaxLifetime: time.Hour}, {IdleAfter: time.Minute, IdleBelow: 5, StoppedFor: time.Hour}}
	bad := []Ladder{{MaxLifetime: -1}, {IdleAfter: time.Minute}, {IdleBelow: 5}, {IdleAfter: time.Minute, IdleBelow: 101}}
	for _, l := range ok {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
	for _, l := range bad {
		if err := l.Validate(); err == nil {
			t.Errorf("%+v: accepted", l)
		}
	}
}

func TestIdleSince(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	cases := []struct {
		name    string
		samples []Usage
		want    time.Time
	}{
		{"none", nil, time.Time{}},
		{"busy last", []Usage{{At: at(0), CPU: 1}, {At: at(1), CPU: 50}}, time.Time{}},
		{"idle since the busy one ended", []Usage{{At: at(0), CPU: 1}, {At: at(1), CPU: 50}, {At: at(2), CPU: 2}, {At: at(3), CPU: 3}}, at(2)},
		{"a busy GPU is not idle", []Usage{{At: at(0), CPU: 1, GPU: 90, HasGPU: true}}, time.Time{}},
		{"no GPU: CPU alone", []Usage{{At: at(0), CPU: 1, GPU: 90}}, at(0)},
		{"both below", []Usage{{At: at(0), CPU: 1, GPU: 4, HasGPU: true}, {At: at(5), CPU: 4.9, GPU: 0, HasGPU: true}}, at(0)},
		{"at the share is not below it", []Usage{{At: at(0), CPU: 5}}, time.Time{}},
	}
	for _, c := range cases {
		if got := IdleSince(c.samples, 5); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestLadderStateOf(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	ev := func(from, to string, m int) store.Event { return store.Event{From: from, To: to, At: at(m)} }
	cases := []struct {
		name    string
		r       store.Instance
		evs     []store.Event
		stopped bool
		since   time.Time
	}{
		{"running", store.Instance{State: "running", RunningSince: at(1)}, []store.Event{ev("loading", "running", 1)}, false, time.Time{}},
		{"stopped once", store.Instance{State: "stopped", RunningSince: at(1)},
			[]store.Event{ev("loading", "running", 1), ev("running", "stopped", 10)}, true, at(10)},
		{"restarted, stopped again: the last stretch", store.Instance{State: "exited", RunningSince: at(1)},
			[]store.Event{ev("running", "stopped", 10), ev("stopped", "running", 20), ev("running", "stopped", 30), ev("stopped", "exited", 40)}, true, at(30)},
		{"seen stopped, no change recorded", store.Instance{State: "stopped", LastSeenAt: at(7)}, nil, true, at(7)},
	}
	for _, c := range cases {
		s := LadderStateOf(c.r, c.evs)
		if s.Stopped != c.stopped || !s.StoppedSince.Equal(c.since) || !s.Booted.Equal(c.r.RunningSince) {
			t.Errorf("%s: %+v, want stopped %v since %v", c.name, s, c.stopped, c.since)
		}
	}
}
