package fleet

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestCostEndsAtTheDestroyAfterACrash: a process that asked for a destroy
// is killed (its run abandoned) before it saw the instance gone; 40
// minutes later another process (down, reconcile) finds it gone. The cost
// ends when the marketplace stopped billing, not when the second process
// looked: the ledger and the simulator's agree within $0.01 per instance,
// whether the destroy went out before the kill, or never did (and down
// sends it).
func TestCostEndsAtTheDestroyAfterACrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		sent   bool // the killed process's destroy reached the marketplace
		finish string
	}{
		{"sent, then down", true, "down"},
		{"sent, then reconcile", true, "reconcile"},
		{"never sent, then down", false, "down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOpts{})
			ctx := context.Background()
			a := e.rentRunning(e.rentReq(0))
			b := e.rentRunning(e.rentReq(1))
			e.clock.Advance(time.Hour)
			// The first process: Destroy's first steps, then SIGKILL.
			for _, id := range []int64{a.ID, b.ID} {
				if err := e.st.RequestDestroy(ctx, id, e.clock.Now()); err != nil {
					t.Fatal(err)
				}
				if tc.sent {
					if err := e.client.DestroyInstance(ctx, id); err != nil {
						t.Fatal(err)
					}
				}
			}
			e.clock.Advance(40 * time.Minute)
			// The second process.
			m2 := e.manager(e.client)
			switch tc.finish {
			case "down":
				if err := m2.Destroy(ctx, []int64{a.ID, b.ID}); err != nil {
					t.Fatal(err)
				}
			default:
				if _, err := m2.Reconcile(ctx, ReconcileOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			e.clock.Advance(time.Hour)
			charged := map[int64]float64{}
			for _, le := range e.mkt.Ledger() {
				charged[le.InstanceID] += le.Amount
			}
			rep, err := m2.Cost(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range rep.Instances {
				t.Logf("instance %d: ledger $%.4f, charged $%.4f (live %v, existed %s)", c.InstanceID, c.Total, charged[c.InstanceID], c.Live, c.Existed)
				if c.Live || math.Abs(c.Total-charged[c.InstanceID]) >= 0.01 {
					t.Errorf("instance %d: ledger $%.4f, charged $%.4f (live %v)", c.InstanceID, c.Total, charged[c.InstanceID], c.Live)
				}
			}
		})
	}
}
