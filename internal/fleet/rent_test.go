package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

func TestRentWaitRunning(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	rec, err := e.m.Rent(ctx, e.rentReq(0))
	if err != nil {
		t.Fatal(err)
	}
	if rec.ID == 0 || rec.IntentID == 0 || rec.Label != Label("f1", rec.IntentID) || rec.OfferID != e.offers[0].ID {
		t.Fatalf("record %+v", rec)
	}
	it, err := e.st.Intent(ctx, rec.IntentID)
	if err != nil || it.State != store.IntentCreated || it.InstanceID != rec.ID {
		t.Fatalf("intent %+v, %v", it, err)
	}
	if got := e.ours(); len(got) != 1 || got[0].Label != rec.Label {
		t.Fatalf("sim instances %+v", got)
	}
	rec, err = e.m.WaitRunning(ctx, rec.ID, WaitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != provider.StateRunning || rec.SSHURL == "" {
		t.Fatalf("after wait: %+v", rec)
	}
}

// Offer gone, balance, auth: the intent fails and nothing else happens.
func TestRentRefusedMarksIntentFailed(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	req := e.rentReq(0)
	req.Offer.ID = 999999999
	_, err := e.m.Rent(ctx, req)
	if !errors.Is(err, ErrRentFailed) || !errors.Is(err, provider.ErrOfferGone) {
		t.Fatalf("err = %v", err)
	}
	bad := e.manager(e.newClient("wrong-key"))
	_, err = bad.Rent(ctx, e.rentReq(1))
	if !errors.Is(err, provider.ErrAuth) {
		t.Fatalf("wrong key: err = %v", err)
	}
	its, _ := e.st.FleetIntents(ctx, "f1")
	if len(its) != 2 {
		t.Fatalf("intents %+v", its)
	}
	for _, it := range its {
		if it.State != store.IntentFailed {
			t.Errorf("intent %d state %s", it.ID, it.State)
		}
	}
	if len(e.ours()) != 0 || len(e.mkt.CreatesPerOffer()) != 0 {
		t.Fatalf("something was rented")
	}
}

// A create is never retried blindly: with 30% of create responses lost, 50
// rents give exactly 50 instances, every one recorded, no offer twice.
func TestLostResponsesNeverDoubleRent(t *testing.T) {
	e := newEnv(t, envOpts{faults: sim.Faults{LostCreate: 0.3}})
	ctx := context.Background()
	lost := 0
	for i := range 50 {
		before := e.gate.listCount()
		rec, err := e.m.Rent(ctx, e.rentReq(i))
		if err != nil {
			t.Fatalf("rent %d: %v", i, err)
		}
		if e.gate.listCount() > before {
			lost++
		}
		if rec.OfferID != e.offers[i].ID {
			t.Fatalf("rent %d recorded offer %d", i, rec.OfferID)
		}
	}
	if lost < 5 {
		t.Fatalf("only %d lost responses: the fault did not fire", lost)
	}
	if n := len(e.ours()); n != 50 {
		t.Fatalf("%d instances exist, want 50", n)
	}
	for offer, n := range e.mkt.CreatesPerOffer() {
		if n != 1 {
			t.Errorf("offer %d created %d times", offer, n)
		}
	}
	e.assertNoLeak(e.st)
	live, _ := e.st.LiveInstances(ctx)
	if len(live) != 50 {
		t.Fatalf("store has %d live instances", len(live))
	}
	t.Logf("%d of 50 create responses lost, all resolved by label", lost)
}

// After a lost response, a listing that fails settles nothing: the intent
// stays pending and create is not called again; reconcile adopts later.
func TestLostResponseWithFailingListingsStaysPending(t *testing.T) {
	e := newEnv(t, envOpts{faults: sim.Faults{LostCreate: 1}})
	ctx := context.Background()
	e.gate.set(func(g *gate) { g.failLists = 1000 })
	_, err := e.m.Rent(ctx, e.rentReq(0))
	if !errors.Is(err, provider.ErrMaybeCreated) {
		t.Fatalf("err = %v", err)
	}
	pend, _ := e.st.PendingIntents(ctx)
	if len(pend) != 1 || e.mkt.CreatesPerOffer()[e.offers[0].ID] != 1 {
		t.Fatalf("pending %+v creates %v", pend, e.mkt.CreatesPerOffer())
	}
	e.gate.set(func(g *gate) { g.failLists = 0 })
	rep, err := e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Changes) != 1 || rep.Changes[0].Kind != ChangeAdopted {
		t.Fatalf("changes %+v", rep.Changes)
	}
	e.assertNoLeak(e.st)
}

// The simulator lists an instance as soon as it exists, so "appears late"
// is played by hiding it: Rent looks twice, then fails the intent; when the
// instance shows up, reconcile still adopts it by its label.
func TestLostResponseLateInstanceAdopted(t *testing.T) {
	e := newEnv(t, envOpts{faults: sim.Faults{LostCreate: 1}})
	ctx := context.Background()
	e.gate.set(func(g *gate) {
		g.onCreate = nil
		g.hide = map[int64]bool{}
	})
	// hide every instance until further notice
	e.gate.set(func(g *gate) {
		for id := int64(1000); id < 20000; id++ {
			g.hide[id] = true
		}
	})
	_, err := e.m.Rent(ctx, e.rentReq(0))
	if !errors.Is(err, ErrRentFailed) {
		t.Fatalf("err = %v", err)
	}
	its, _ := e.st.FleetIntents(ctx, "f1")
	if len(its) != 1 || its[0].State != store.IntentFailed {
		t.Fatalf("intents %+v", its)
	}
	e.gate.set(func(g *gate) { g.hide = nil })
	e.clock.Advance(time.Minute)
	rep, err := e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Changes) != 1 || rep.Changes[0].Kind != ChangeAdopted {
		t.Fatalf("changes %+v", rep.Changes)
	}
	e.assertNoLeak(e.st)
	if e.mkt.CreatesPerOffer()[e.offers[0].ID] != 1 {
		t.Fatal("offer rented twice")
	}
}
