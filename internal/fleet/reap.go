package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vastfleet/vastfleet/internal/store"
)

// Reap policies, as the agents' dead-man switch.
const (
	ReapStop    = "stop"
	ReapDestroy = "destroy"
)

// ReapOptions say which of a fleet's instances count as abandoned.
type ReapOptions struct {
	Fleet string
	// LastHeard is when each instance's agent last reported, by instance
	// id. Instances never heard from are left alone: nothing tells a dead
	// agent from one that never ran (a fleet launched without agents).
	LastHeard map[int64]time.Time
	// After is the silence that makes an instance abandoned (the fleet's
	// --orphan-after).
	After time.Duration
	// Policy is ReapStop or ReapDestroy.
	Policy string
	// Since, when set, is the earliest moment silence counts from: a
	// coordinator that was itself down heard nobody, and must not reap
	// on its first look the nodes it could not hear.
	Since time.Time
}

// Abandoned picks, from a fleet's store rows, the instances Reap would act
// on at now; it only reads, so a caller can look before taking the data
// dir's lock.
func Abandoned(recs []store.Instance, storeID string, o ReapOptions, now time.Time) []Reaped {
	var out []Reaped
	for _, r := range recs {
		heard, ok := o.LastHeard[r.ID]
		if !ok || !r.GoneAt.IsZero() || r.Wanted == store.WantDestroy {
			continue
		}
		if o.Policy == ReapStop && r.Wanted == store.WantParked {
			continue // already stopped on purpose
		}
		l, ok := ParseLabel(r.Label)
		if !ok || l.Store != storeID || l.Fleet != o.Fleet {
			continue
		}
		from := heard
		if o.Since.After(from) {
			from = o.Since
		}
		if now.Sub(from) <= o.After {
			continue
		}
		out = append(out, Reaped{ID: r.ID, Silent: now.Sub(heard), Action: o.Policy})
	}
	slices.SortFunc(out, func(a, b Reaped) int { return int(a.ID - b.ID) })
	return out
}

// Reaped is one instance acted on.
type Reaped struct {
	ID     int64
	Silent time.Duration
	Action string // ReapStop or ReapDestroy
	Err    error
}

// Reap stops or destroys the fleet's instances whose agent has been
// silent for longer than o.After. A stopped or outbid container cannot run
// its own dead-man switch, so vastfleet does it from outside. Only
// instances whose label names this store and this fleet are touched, and
// Stop and Destroy check the marketplace's label once more before acting.
// Each action is recorded as a note on the instance, which `ls` shows.
func (m *Manager) Reap(ctx context.Context, o ReapOptions) ([]Reaped, error) {
	if o.Policy != ReapStop && o.Policy != ReapDestroy {
		return nil, fmt.Errorf("reap policy %q: want %q or %q", o.Policy, ReapStop, ReapDestroy)
	}
	if o.After <= 0 {
		return nil, fmt.Errorf("reap: silence threshold %v must be positive", o.After)
	}
	storeID, err := m.S.ID(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: o.Fleet})
	if err != nil {
		return nil, err
	}
	now := m.now()
	out := Abandoned(recs, storeID, o, now)
	if len(out) > 0 {
		// A live agent's dead-man switch has acted already, at a moment
		// known: the coordinator's last heartbeat plus After. The store
		// learns it from a listing dated there, so that cost ends compute
		// (or everything, for a destroy) at the agent's own act instead
		// of at this reap, or mid-way through the time nobody watched.
		hints := make(map[int64]time.Time, len(out))
		for _, rp := range out {
			hints[rp.ID] = DeadManAt(o.LastHeard[rp.ID], o.After)
		}
		if _, err := m.Reconcile(ctx, ReconcileOptions{SelfStops: hints}); err != nil {
			m.log().Warn("reap: listing before acting failed; what the agents did themselves is dated later", "err", err)
		} else if recs, err = m.S.Instances(ctx, store.InstanceFilter{Fleet: o.Fleet}); err != nil {
			return nil, err
		} else {
			now = m.now()
			out = Abandoned(recs, storeID, o, now)
		}
	}
	for i := range out {
		rp := &out[i]
		note := fmt.Sprintf("reaped (%s): its agent was silent for %s, over the fleet's orphan-after of %s",
			rp.Action, rp.Silent.Round(time.Second), o.After)
		m.log().Warn("reaping an instance whose agent fell silent", "instance", rp.ID, "fleet", o.Fleet,
			"silent", rp.Silent.Round(time.Second), "action", rp.Action)
		if rp.Action == ReapDestroy {
			rp.Err = m.Destroy(ctx, []int64{rp.ID})
		} else {
			rp.Err = m.Stop(ctx, []int64{rp.ID})
		}
		if rp.Err != nil {
			note += fmt.Sprintf("; the %s failed: %v", rp.Action, rp.Err)
		}
		if err := m.S.AddNote(ctx, rp.ID, now, note); err != nil && rp.Err == nil {
			rp.Err = err
		}
	}
	return out, nil
}
