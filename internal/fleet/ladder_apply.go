package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// ladderKey is the store meta key of a fleet's teardown ladder.
func ladderKey(fleetName string) string { return "ladder." + fleetName }

// SaveLadder records the fleet's teardown ladder (launch --max-lifetime,
// --idle-after/--idle-below, --stopped-for), for reap and ls.
func SaveLadder(ctx context.Context, st *store.Store, fleetName string, l Ladder) error {
	if err := l.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return st.SetMeta(ctx, ladderKey(fleetName), string(b))
}

// FleetLadder is the ladder SaveLadder recorded; the zero Ladder when none.
func FleetLadder(ctx context.Context, st *store.Store, fleetName string) (Ladder, error) {
	v, err := st.GetMeta(ctx, ladderKey(fleetName))
	if errors.Is(err, store.ErrNotFound) {
		return Ladder{}, nil
	}
	if err != nil {
		return Ladder{}, err
	}
	var l Ladder
	if err := json.Unmarshal([]byte(v), &l); err != nil {
		return Ladder{}, fmt.Errorf("fleet %s: its teardown ladder in the store does not parse (%v); launch the fleet again with the ladder's flags", fleetName, err)
	}
	return l, nil
}

// LadderStateOf is where a store instance stands for the ladder: booted
// when it first ran, stopped while its state bills storage only (from
// the last state change into such a state). Idle is not known here: the
// caller adds IdleSince from the instance's usage.
func LadderStateOf(r store.Instance, events []store.Event) LadderState {
	s := LadderState{Booted: r.RunningSince}
	if !stoppedState(r.State) {
		return s
	}
	s.Stopped = true
	// Events are in order: the stop that began the current stretch.
	for _, e := range events {
		switch {
		case !stoppedState(e.To):
			s.StoppedSince = time.Time{}
		case s.StoppedSince.IsZero():
			s.StoppedSince = e.At
		}
	}
	if s.StoppedSince.IsZero() {
		s.StoppedSince = r.LastSeenAt // seen stopped, no change recorded
	}
	return s
}

// stoppedState: an instance in it bills storage and no compute.
func stoppedState(state string) bool {
	compute, storage := provider.Bills(state)
	return !compute && storage
}

// Laddered is one instance and its next rung.
type Laddered struct {
	ID   int64
	Step Step
	Err  error
}

// LadderSteps is each live instance of the fleet with its next rung under
// l at now (instances with none are left out), by id; it only reads, for
// ls to show and ApplyLadder to act on the due ones.
func (m *Manager) LadderSteps(ctx context.Context, fleetName string, l Ladder) ([]Laddered, error) {
	if l.IsZero() {
		return nil, nil
	}
	storeID, err := m.S.ID(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: fleetName})
	if err != nil {
		return nil, err
	}
	var out []Laddered
	for _, r := range recs {
		if !r.GoneAt.IsZero() || r.Wanted == store.WantDestroy {
			continue
		}
		if lb, ok := ParseLabel(r.Label); !ok || lb.Store != storeID || lb.Fleet != fleetName {
			continue
		}
		st, err := m.NextStep(ctx, r, l)
		if err != nil {
			return nil, err
		}
		if st.Action != "" {
			out = append(out, Laddered{ID: r.ID, Step: st})
		}
	}
	slices.SortFunc(out, func(a, b Laddered) int { return int(a.ID - b.ID) })
	return out, nil
}

// NextStep is instance r's next rung under l (zero Step: none), from its
// row and its recorded state changes.
func (m *Manager) NextStep(ctx context.Context, r store.Instance, l Ladder) (Step, error) {
	if l.IsZero() || !r.Live() || r.Wanted == store.WantDestroy {
		return Step{}, nil
	}
	evs, err := m.S.Events(ctx, r.ID)
	if err != nil {
		return Step{}, err
	}
	return l.Next(LadderStateOf(r, evs)), nil
}

// ApplyLadder stops or destroys the fleet's instances whose next rung is
// due, noting each on the instance (ls shows it).
func (m *Manager) ApplyLadder(ctx context.Context, fleetName string, l Ladder) ([]Laddered, error) {
	steps, err := m.LadderSteps(ctx, fleetName, l)
	if err != nil {
		return nil, err
	}
	now := m.now()
	var done []Laddered
	for _, s := range steps {
		if !s.Step.Due(now) {
			continue
		}
		m.log().Warn("teardown ladder", "instance", s.ID, "fleet", fleetName, "action", s.Step.Action, "reason", s.Step.Reason)
		if s.Step.Action == LadderDestroy {
			s.Err = m.Destroy(ctx, []int64{s.ID})
		} else {
			s.Err = m.Stop(ctx, []int64{s.ID})
		}
		note := fmt.Sprintf("teardown ladder (%s): %s", s.Step.Action, s.Step.Reason)
		if s.Err != nil {
			note += fmt.Sprintf("; the %s failed: %v", s.Step.Action, s.Err)
		}
		if err := m.S.AddNote(ctx, s.ID, now, note); err != nil && s.Err == nil {
			s.Err = err
		}
		done = append(done, s)
	}
	return done, nil
}
