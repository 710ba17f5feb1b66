package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/vastfleet/vastfleet/internal/store"
)

// Heartbeats is what the coordinator heard: each fleet's dead-man switch
// as launched, and when each instance's agent last reported. The
// coordinator's database satisfies it; fleet names no coordinator.
type Heartbeats interface {
	FleetPolicy(ctx context.Context, fleet string) (after time.Duration, policy string, ok bool, err error)
	LastHeard(ctx context.Context, fleet string) (map[int64]time.Time, error)
}

// Switch is the dead-man switch asked for: After and Policy stand for a
// fleet that recorded none, and override the recorded one where Set.
type Switch struct {
	After     time.Duration
	Policy    string
	AfterSet  bool
	PolicySet bool
}

// SwitchFor is how fleet name is reaped: its launch-time dead-man switch,
// unless sw says otherwise, with the silence heard so far.
func SwitchFor(ctx context.Context, hb Heartbeats, name string, sw Switch) (ReapOptions, error) {
	after, policy, ok, err := hb.FleetPolicy(ctx, name)
	if err != nil {
		return ReapOptions{}, err
	}
	if !ok || sw.AfterSet || after <= 0 {
		after = sw.After
	}
	if !ok || sw.PolicySet || policy == "" {
		policy = sw.Policy
	}
	heard, err := hb.LastHeard(ctx, name)
	if err != nil {
		return ReapOptions{}, err
	}
	return ReapOptions{Fleet: name, LastHeard: heard, After: after, Policy: policy}, nil
}

// Sweep is one reap of a data dir's fleets: teardown ladders first, then
// the instances whose agent fell silent.
type Sweep struct {
	// Fleet limits the sweep to one fleet; empty sweeps every fleet.
	Fleet  string
	Switch Switch
	// Heartbeats opens what the coordinator heard; nil and no error when
	// no coordinator ever ran. It is opened after the ladders, which need
	// none.
	Heartbeats func(context.Context) (Heartbeats, error)
	OnLaddered func(fleet string, d Laddered)
	OnReaped   func(fleet string, r Reaped)
}

// Swept is what a Sweep did beyond what it reported step by step.
type Swept struct {
	// NoCoordinator: no coordinator ever ran, so no silence was judged.
	NoCoordinator bool
	// Reaped counts the silent instances acted on.
	Reaped int
	// Failed are the steps that failed (each reported too).
	Failed []error
}

// Sweep applies the teardown ladders of s's fleets, then reaps their
// silent instances as each fleet was launched. m must be a writer whose
// store is up to date with the marketplace.
func (m *Manager) Sweep(ctx context.Context, s Sweep) (Swept, error) {
	var out Swept
	fleets := []string{s.Fleet}
	if s.Fleet == "" {
		all, err := m.S.ListFleets(ctx)
		if err != nil {
			return out, err
		}
		fleets = fleets[:0]
		for _, fl := range all {
			fleets = append(fleets, fl.Name)
		}
	}
	for _, name := range fleets {
		l, err := FleetLadder(ctx, m.S, name)
		if err != nil {
			return out, err
		}
		done, err := m.ApplyLadder(ctx, name, l)
		if err != nil {
			return out, err
		}
		for _, d := range done {
			s.OnLaddered(name, d)
			if d.Err != nil {
				out.Failed = append(out.Failed, d.Err)
			}
		}
	}
	hb, err := s.Heartbeats(ctx)
	if err != nil {
		return out, err
	}
	if hb == nil {
		out.NoCoordinator = true
		return out, nil
	}
	for _, name := range fleets {
		o, err := SwitchFor(ctx, hb, name, s.Switch)
		if err != nil {
			return out, err
		}
		if len(o.LastHeard) == 0 {
			continue
		}
		res, err := m.Reap(ctx, o)
		if err != nil {
			return out, err
		}
		for _, r := range res {
			out.Reaped++
			s.OnReaped(name, r)
			if r.Err != nil {
				out.Failed = append(out.Failed, r.Err)
			}
		}
	}
	return out, nil
}

// Pass is one of the coordinator's passes over every fleet.
type Pass struct {
	Heartbeats Heartbeats
	// Switch is the coordinator's, for a fleet that recorded none.
	Switch Switch
	// Since is the coordinator's start: it heard nobody before.
	Since time.Time
	// Writer takes the data dir's lock and gives a manager that may act,
	// and the lock's release; it is called only when something is due.
	Writer     func(context.Context) (*Manager, func(), error)
	OnLaddered func(fleet string, d Laddered)
	OnReaped   func(fleet string, r Reaped)
}

// ReapPass applies the due teardown ladder steps and reaps the silent
// instances of every fleet, looking through m (which only reads) first
// and taking p.Writer only for a pass that has something to do, so that
// other commands are not kept waiting on the lock.
func (m *Manager) ReapPass(ctx context.Context, p Pass) error {
	st := m.S
	storeID, err := st.ID(ctx)
	if err != nil {
		return err
	}
	all, err := st.ListFleets(ctx)
	if err != nil {
		return err
	}
	var due []ReapOptions
	ladders := map[string]Ladder{}
	for _, fl := range all {
		// The fleet's teardown ladder, due steps only.
		l, err := FleetLadder(ctx, st, fl.Name)
		if err != nil {
			return err
		}
		steps, err := m.LadderSteps(ctx, fl.Name, l)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(steps, func(s Laddered) bool { return s.Step.Due(m.now()) }) {
			ladders[fl.Name] = l
		}
		// Each fleet as it was launched; the coordinator's flags only
		// for a fleet with no recorded switch.
		o, err := SwitchFor(ctx, p.Heartbeats, fl.Name, p.Switch)
		if err != nil || len(o.LastHeard) == 0 {
			continue
		}
		o.Since = p.Since
		recs, err := st.Instances(ctx, store.InstanceFilter{Fleet: fl.Name})
		if err != nil {
			return err
		}
		if len(Abandoned(recs, storeID, o, m.now())) > 0 {
			due = append(due, o)
		}
	}
	if len(due) == 0 && len(ladders) == 0 {
		return nil
	}
	w, release, err := p.Writer(ctx)
	if err != nil {
		return err // busy: the next pass tries again
	}
	defer release()
	// What looked due was read from the store, which nobody may have
	// brought up to date since the launch that wrote it died: an instance
	// it last saw loading has run since. Steps are decided again on a
	// fresh listing, or not at all (a destroy on a stale view is worse
	// than a late one).
	if _, err := w.Reconcile(ctx, ReconcileOptions{}); err != nil {
		return err
	}
	for name, l := range ladders {
		done, err := w.ApplyLadder(ctx, name, l)
		if err != nil {
			return err
		}
		for _, d := range done {
			p.OnLaddered(name, d)
		}
	}
	for _, o := range due {
		res, err := w.Reap(ctx, o)
		if err != nil {
			return err
		}
		for _, r := range res {
			p.OnReaped(o.Fleet, r)
		}
	}
	return nil
}

// PassEvery runs pass at once, and then every tick of wall time until ctx
// ends; a failed pass is logged and the next one tries again. The first
// pass comes at once: a coordinator started again after a crash owes the
// steps that fell due while it was down.
func PassEvery(ctx context.Context, tick time.Duration, log *slog.Logger, pass func(context.Context) error) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if err := pass(ctx); err != nil && ctx.Err() == nil {
			log.Warn("reaping silent instances", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// DeadManMoments is when each instance's agent will have stopped or
// destroyed it by its dead-man switch: its last heartbeat plus its
// fleet's orphan-after (ReconcileOptions.SelfStops).
func DeadManMoments(ctx context.Context, st *store.Store, hb Heartbeats) (map[int64]time.Time, error) {
	fleets, err := st.ListFleets(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int64]time.Time{}
	for _, fl := range fleets {
		after, _, ok, err := hb.FleetPolicy(ctx, fl.Name)
		if err != nil {
			return nil, err
		}
		if !ok || after <= 0 {
			continue
		}
		heard, err := hb.LastHeard(ctx, fl.Name)
		if err != nil {
			return nil, err
		}
		for id, h := range heard {
			out[id] = DeadManAt(h, after)
		}
	}
	return out, nil
}

// Report is d as reap and the coordinator print it, and whether it failed
// (a failure goes to the error stream).
func (d Laddered) Report(fleetName string) (string, bool) {
	if d.Err != nil {
		return fmt.Sprintf("instance %d (fleet %s): teardown ladder, %s; %s failed: %v", d.ID, fleetName, d.Step.Reason, d.Step.Action, d.Err), true
	}
	verb := map[string]string{LadderStop: "stopped", LadderDestroy: "destroyed"}[d.Step.Action]
	return fmt.Sprintf("instance %d (fleet %s): teardown ladder, %s: %s", d.ID, fleetName, d.Step.Reason, verb), false
}

// Report is r as reap and the coordinator print it, and whether it failed.
func (r Reaped) Report(fleetName string) (string, bool) {
	if r.Err != nil {
		return fmt.Sprintf("instance %d (fleet %s): agent silent for %s; %s failed: %v", r.ID, fleetName, r.Silent.Round(time.Second), r.Action, r.Err), true
	}
	verb := map[string]string{ReapStop: "stopped", ReapDestroy: "destroyed"}[r.Action]
	return fmt.Sprintf("instance %d (fleet %s): agent silent for %s: %s", r.ID, fleetName, r.Silent.Round(time.Second), verb), false
}
