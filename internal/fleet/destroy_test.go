package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

func TestDestroyConfirmedByListing(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	recs := rentN(t, e, 2)
	// The marketplace answers success to the first destroy but does nothing:
	// the call returning is not the instance being gone.
	e.gate.set(func(g *gate) { g.eatDeletes = 1 })
	if err := e.m.Destroy(ctx, []int64{recs[0].ID}); err != nil {
		t.Fatal(err)
	}
	got, _ := e.st.Instance(ctx, recs[0].ID)
	if got.GoneAt.IsZero() || got.Wanted != store.WantDestroy {
		t.Fatalf("after destroy: %+v", got)
	}
	if len(e.ours()) != 1 {
		t.Fatalf("sim still has %d of ours", len(e.ours()))
	}
}

// When listings fail after the destroy call, the instance stays "destroy
// requested", not gone, and the error says so; reconcile confirms later.
func TestDestroyListingFailsNotGone(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	recs := rentN(t, e, 1)
	e.gate.set(func(g *gate) { g.failLists = 100000 })
	err := e.m.Destroy(ctx, []int64{recs[0].ID})
	if !errors.Is(err, ErrNotConfirmed) {
		t.Fatalf("err = %v", err)
	}
	got, _ := e.st.Instance(ctx, recs[0].ID)
	if !got.GoneAt.IsZero() || got.Wanted != store.WantDestroy || got.DestroyRequestedAt.IsZero() {
		t.Fatalf("after unconfirmed destroy: %+v", got)
	}
	e.gate.set(func(g *gate) { g.reset() })
	e.clock.Advance(DefaultGrace)
	rep, err := e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil || len(rep.Changes) != 1 || rep.Changes[0].Kind != ChangeGone {
		t.Fatalf("reconcile: %v %v", rep.Changes, err)
	}
}

// A revoked key answered as 404 + auth_error: never "instance gone".
func TestAuth404IsNotGone(t *testing.T) {
	e := newEnv(t, envOpts{faults: sim.Faults{AuthAs404: true}})
	ctx := context.Background()
	recs := rentN(t, e, 1)
	bad := e.manager(e.newClient("revoked-key"))
	if err := bad.Destroy(ctx, []int64{recs[0].ID}); !errors.Is(err, provider.ErrAuth) {
		t.Fatalf("destroy: err = %v", err)
	}
	if _, err := bad.WaitRunning(ctx, recs[0].ID, WaitOptions{}); !errors.Is(err, provider.ErrAuth) {
		t.Fatalf("wait: err = %v", err)
	}
	if _, err := bad.Reconcile(ctx, ReconcileOptions{}); !errors.Is(err, provider.ErrAuth) {
		t.Fatalf("reconcile: err = %v", err)
	}
	got, _ := e.st.Instance(ctx, recs[0].ID)
	if !got.GoneAt.IsZero() {
		t.Fatal("marked gone on an auth failure")
	}
	if len(e.ours()) != 1 {
		t.Fatal("instance vanished")
	}
	// The good key still destroys it, confirmed.
	if err := e.m.Destroy(ctx, []int64{recs[0].ID}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.st.Instance(ctx, recs[0].ID); got.GoneAt.IsZero() || len(e.ours()) != 0 {
		t.Fatal("not destroyed")
	}
}

// Reconcile re-sends the destroy of an instance the store wants destroyed
// that is still listed.
func TestReconcileRedestroys(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	recs := rentN(t, e, 1)
	e.gate.set(func(g *gate) { g.eatDeletes = 1000; g.failLists = 0 })
	e.m.ListTries = 1
	_ = e.m.Destroy(ctx, []int64{recs[0].ID}) // times out unconfirmed
	e.gate.set(func(g *gate) { g.reset() })
	rep, err := e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil || len(rep.Redestroyed) != 1 {
		t.Fatalf("reconcile: %+v %v", rep, err)
	}
	if len(e.ours()) != 0 {
		t.Fatal("still there")
	}
	e.clock.Advance(DefaultGrace)
	rep, err = e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil || len(rep.Changes) != 1 || rep.Changes[0].Kind != ChangeGone {
		t.Fatalf("reconcile: %+v %v", rep, err)
	}
}

// An id the store knows may name someone else's instance on the
// marketplace (another data dir on a shared marketplace, a reset
// simulator): without our label on the row, it is never stopped, started
// or destroyed, by destroy, stop or reconcile.
func TestNeverTouchesAnInstanceWithoutOurLabel(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	rec := rentN(t, e, 1)[0]
	// The marketplace's instance under this id is now another data dir's.
	theirs := "vastfleet:0000000000000000:their-fleet:1"
	if err := e.client.SetLabel(ctx, rec.ID, theirs); err != nil {
		t.Fatal(err)
	}
	alive := func() bool {
		for _, s := range e.mkt.State() {
			if s.ID == rec.ID {
				return !s.Destroyed && s.Status != "stopped"
			}
		}
		return false
	}
	if err := e.m.Stop(ctx, []int64{rec.ID}); err == nil || !strings.Contains(err.Error(), "not touching it") {
		t.Fatalf("stop of an instance with another label = %v, want a refusal", err)
	}
	e.clock.Advance(DefaultGrace)
	if err := e.m.Destroy(ctx, []int64{rec.ID}); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if _, err := e.m.Reconcile(ctx, ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	if !alive() {
		t.Fatal("the listed instance, which carries another label, was stopped or destroyed")
	}
	got, _ := e.st.Instance(ctx, rec.ID)
	if got.GoneAt.IsZero() {
		t.Fatalf("the store's own instance (label %q) is in no listing, yet not marked gone: %+v", rec.Label, got)
	}
}
