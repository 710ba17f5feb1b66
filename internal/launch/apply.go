package launch

// The applier: a plan carried out through FleetOps, in the plan's order.

import (
	"context"
	"time"

	"github.com/vastfleet/vastfleet/internal/store"
)

// apply carries out a plan in order: events are emitted and records
// written where they stand; each run of parks, starts or change bids goes
// out as one batch; the nodes to destroy (replaced or surplus) are
// returned for the tick's one destroy. Rents are sent by dispatch, which
// paces them and tracks them in flight (renting).
func (r *runner) apply(ctx context.Context, plan []Action, now time.Time) (toDestroy []int64) {
	for i := 0; i < len(plan); {
		a := plan[i]
		j := i + 1
		for j < len(plan) && plan[j].Kind == a.Kind && batched(a.Kind) {
			j++
		}
		switch a.Kind {
		case ActSay:
			r.emit(*a.Event)
		case ActMarkBad:
			if err := r.f.MarkBadHost(ctx, store.BadHost{MachineID: a.Machine, Reason: a.Reason, FailedAt: now, Until: now.Add(r.spec.BadHostTTL)}); err != nil {
				r.emit(Event{Event: EvWarn, At: now, Msg: err.Error()})
			}
		case ActRecordRelease:
			if err := r.f.SetMeta(ctx, releasedKey(r.spec.Fleet), now.UTC().Format(time.RFC3339Nano)); err != nil {
				r.emit(Event{Event: EvWarn, At: now, Msg: err.Error()})
			}
		case ActPark:
			r.sendStop(ctx, r.nodesOf(plan[i:j]), now)
		case ActRelease:
			r.sendStart(ctx, r.nodesOf(plan[i:j]), now)
		case ActRebid:
			r.changeBids(ctx, r.bidsOf(plan[i:j]), now)
		case ActReplace, ActDestroy:
			toDestroy = append(toDestroy, a.Instance)
		}
		i = j
	}
	return toDestroy
}

// batched: actions of this kind go to the marketplace together.
func batched(k ActionKind) bool { return k == ActPark || k == ActRelease || k == ActRebid }

func (r *runner) nodesOf(acts []Action) []*node {
	ns := make([]*node, 0, len(acts))
	for _, a := range acts {
		if n, ok := r.nodes[a.Instance]; ok {
			ns = append(ns, n)
		}
	}
	return ns
}

func (r *runner) bidsOf(acts []Action) []bidChange {
	cs := make([]bidChange, 0, len(acts))
	for _, a := range acts {
		if n, ok := r.nodes[a.Instance]; ok {
			cs = append(cs, bidChange{n, a.Price})
		}
	}
	return cs
}
