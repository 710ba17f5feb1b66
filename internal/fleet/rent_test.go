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
	storeID, _ := e.st.ID(ctx)
	lp, _ := ParseLabel(rec.Label)
	if rec.ID == 0 || rec.IntentID == 0 || lp.Store != storeID || lp.Fleet != "f1" || lp.Intent != rec.IntentID || lp.Nonce == "" || rec.OfferID != e.offers[0].ID {
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

// Under the harsh fault profile (429s, 5xx, lost creates, offers taken
// between search and create), a batch of rents followed by a reconcile
// leaves every instance of ours known and no offer rented twice.
func TestHarshProfileNoLeak(t *testing.T) {
	f, err := sim.Profile("harsh")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{faults: f, seed: 11})
	ctx := context.Background()
	var ok, failed, unknown int
	for i := range 40 {
		_, err := e.m.Rent(ctx, e.rentReq(i))
		switch {
		case err == nil:
			ok++
		case errors.Is(err, provider.ErrMaybeCreated):
			unknown++
		case errors.Is(err, ErrRentFailed) || errors.Is(err, provider.ErrRateLimited):
			failed++
		default:
			t.Fatalf("rent %d: %v", i, err)
		}
	}
	t.Logf("harsh: %d rented, %d refused, %d unknown", ok, failed, unknown)
	for range 5 { // listings themselves may fail; a reconcile that errs changes nothing
		if _, err := e.m.Reconcile(ctx, ReconcileOptions{}); err == nil {
			break
		}
	}
	e.assertNoLeak(e.st)
	if ok < 20 {
		t.Fatalf("only %d of 40 rents succeeded", ok)
	}
}

// A short listing after a lost response proves nothing either.
func TestLostResponseWithShortListingStaysPending(t *testing.T) {
	e := newEnv(t, envOpts{faults: sim.Faults{LostCreate: 1}})
	ctx := context.Background()
	e.gate.set(func(g *gate) { g.shortLists = 1000 })
	if _, err := e.m.Rent(ctx, e.rentReq(0)); !errors.Is(err, provider.ErrMaybeCreated) {
		t.Fatalf("err = %v", err)
	}
	if pend, _ := e.st.PendingIntents(ctx); len(pend) != 1 {
		t.Fatalf("pending %+v", pend)
	}
	if n := e.mkt.CreatesPerOffer()[e.offers[0].ID]; n != 1 {
		t.Fatalf("%d creates", n)
	}
}

func TestStopStartWanted(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	rec, err := e.m.Rent(ctx, e.rentReq(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.WaitRunning(ctx, rec.ID, WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Stop(ctx, []int64{rec.ID}); err != nil {
		t.Fatal(err)
	}
	got, _ := e.st.Instance(ctx, rec.ID)
	if got.Wanted != store.WantParked || got.State != provider.StateStopped {
		t.Fatalf("after stop: wanted %s state %s", got.Wanted, got.State)
	}
	if err := e.m.Start(ctx, []int64{rec.ID}); err != nil {
		t.Fatal(err)
	}
	got, _ = e.st.Instance(ctx, rec.ID)
	if got.Wanted != store.WantRunning || got.State != provider.StateLoading {
		t.Fatalf("after start: wanted %s state %s", got.Wanted, got.State)
	}
	if err := e.m.Destroy(ctx, []int64{rec.ID}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Start(ctx, []int64{rec.ID}); err == nil {
		t.Fatal("started a destroyed instance")
	}
}

// Renting by offer id alone takes the details from the marketplace.
func TestRentByOfferID(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	off := e.offers[2]
	rec, err := e.m.Rent(ctx, RentRequest{Fleet: "f1", OfferID: off.ID,
		Create: provider.CreateRequest{Image: "ubuntu:22.04", Disk: 20}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.OfferID != off.ID || rec.MachineID != off.MachineID || rec.GPUName != off.GPUName || rec.NumGPUs != off.NumGPUs || rec.DPHTotal <= 0 {
		t.Fatalf("record %+v for offer %+v", rec, off)
	}
}
