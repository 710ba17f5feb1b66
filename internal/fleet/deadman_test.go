package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/store"
)

// ledgerEnds is where each kind of each instance's billing ended on the
// simulator's ledger.
func (e *env) ledgerEnds() map[int64]map[string]time.Time {
	ended := map[int64]map[string]time.Time{}
	for _, le := range e.mkt.Ledger() {
		if ended[le.InstanceID] == nil {
			ended[le.InstanceID] = map[string]time.Time{}
		}
		if le.To.After(ended[le.InstanceID][le.Kind]) {
			ended[le.InstanceID][le.Kind] = le.To
		}
	}
	return ended
}

// checkEnds fails unless cost ends instance id's compute (and, once it is
// gone, its storage) where the marketplace's ledger does.
func (e *env) checkEnds(what string, id int64) {
	e.t.Helper()
	c, err := e.m.InstanceCost(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	ended := e.ledgerEnds()[id]
	if !c.ComputeSpan.To.Equal(ended["compute"]) {
		e.t.Errorf("%s: cost ends instance %d's compute at %s, the marketplace's ledger at %s",
			what, id, c.ComputeSpan.To.Sub(simStart), ended["compute"].Sub(simStart))
	}
	if !c.Live && !c.StorageSpan.To.Equal(ended["storage"]) {
		e.t.Errorf("%s: cost ends instance %d's storage at %s, the marketplace's ledger at %s",
			what, id, c.StorageSpan.To.Sub(simStart), ended["storage"].Sub(simStart))
	}
}

// An agent whose coordinator fell silent stops (or destroys) its own
// instance after the orphan-after time, with the instance's key: no
// vastfleet process sees it happen. When vastfleet next looks (reap, or
// any reconcile given the coordinator's record of the agents), cost ends
// the compute at the agent's act, the last heartbeat plus orphan-after,
// not at the reap two hours later, nor mid-way through the two hours
// nobody watched.
func TestDeadManStopEndsComputeAtTheAgentsAct(t *testing.T) {
	const after = 30 * time.Minute
	for _, tc := range []struct {
		name      string
		policy    string
		reconcile bool // a reconcile with the coordinator's record comes first (ls, cost, up --resume)
	}{
		{"stop, reaped", ReapStop, false},
		{"stop, reconciled then reaped", ReapStop, true},
		{"destroy, reaped", ReapDestroy, false},
		{"destroy, reconciled then reaped", ReapDestroy, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			ctx := context.Background()
			a := e.rentRunning(e.rentReq(0))
			e.clock.Advance(5 * time.Minute)
			heard := e.clock.Now() // the coordinator's last heartbeat from a's agent
			e.clock.Set(DeadManAt(heard, after))
			var err error
			if tc.policy == ReapStop {
				err = e.client.StopInstance(ctx, a.ID) // the agent's own act, as vastfleet never sees it
			} else {
				err = e.client.DestroyInstance(ctx, a.ID)
			}
			if err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(2 * time.Hour) // nobody watching
			heardMap := map[int64]time.Time{a.ID: heard}
			if tc.reconcile {
				e.m.SelfStops = func(context.Context) (map[int64]time.Time, error) {
					return map[int64]time.Time{a.ID: DeadManAt(heard, after)}, nil
				}
				if _, err := e.m.Reconcile(ctx, ReconcileOptions{}); err != nil {
					t.Fatal(err)
				}
				e.checkEnds("reconciled", a.ID)
			}
			if _, err := e.m.Reap(ctx, ReapOptions{Fleet: "f1", LastHeard: heardMap, After: after, Policy: tc.policy}); err != nil {
				t.Fatal(err)
			}
			e.checkEnds("reaped", a.ID)
			got, err := e.st.Instance(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if tc.policy == ReapStop && (got.Wanted != store.WantParked || got.State != "stopped") {
				t.Errorf("after the reap: state %s, wanted %s; want stopped and parked", got.State, got.Wanted)
			}
			if tc.policy == ReapDestroy && got.GoneAt.IsZero() {
				t.Errorf("after the reap: still live")
			}
		})
	}
}

// A dead-man moment that has not come yet (the agent is heard, the
// coordinator runs) says nothing about a stop a listing shows: a stop made
// by hand meanwhile is dated as any other.
func TestDeadManMomentAheadIsNotUsed(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	a := e.rentRunning(e.rentReq(0))
	e.clock.Advance(5 * time.Minute)
	stopAt := e.clock.Now()
	if err := e.client.StopInstance(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Second)
	known, err := e.st.Instance(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.m.SelfStops = func(context.Context) (map[int64]time.Time, error) {
		return map[int64]time.Time{a.ID: e.clock.Now().Add(20 * time.Minute)}, nil
	}
	if _, err := e.m.Reconcile(ctx, ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	evs, err := e.st.Events(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	// As any stop vastfleet did not make: mid-way since the last listing.
	want := known.LastSeenAt.Add(e.clock.Now().Sub(known.LastSeenAt) / 2)
	if last := evs[len(evs)-1]; last.To != "stopped" || !last.At.Equal(want) {
		t.Errorf("the stop (made at %s) is dated %s (%s), want %s", stopAt.Sub(simStart), last.At.Sub(simStart), last.To, want.Sub(simStart))
	}
}

// A stop by the teardown ladder (max lifetime, here) is this process's own
// stop: cost ends compute at it, as the marketplace does.
func TestLadderStopEndsCompute(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	a := e.rentRunning(e.rentReq(0))
	l := Ladder{MaxLifetime: 20 * time.Minute}
	e.clock.Advance(25 * time.Minute)
	done, err := e.m.ApplyLadder(ctx, "f1", l)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || done[0].ID != a.ID || done[0].Err != nil {
		t.Fatalf("ladder: %+v, want instance %d stopped", done, a.ID)
	}
	e.clock.Advance(time.Hour)
	if _, err := e.m.Reconcile(ctx, ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	e.checkEnds("stopped by the ladder", a.ID)
	c, err := e.m.InstanceCost(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != "stopped" || !c.Live {
		t.Errorf("after the ladder: %s, live %v; want stopped", c.State, c.Live)
	}
}
