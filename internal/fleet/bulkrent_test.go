package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

func (e *env) bulkReq(from, n int) BulkRentRequest {
	return BulkRentRequest{Fleet: "f1", Offers: append([]market.Offer(nil), e.offers[from:from+n]...),
		Create: provider.CreateRequest{Image: "ubuntu:22.04", Disk: 20, Runtype: "ssh"}}
}

// checkBulk asserts that every outcome is an instance recorded under its
// own intent of one batch, on its offer's machine, or a failure that
// rented nothing; that no offer was created twice; and that store and
// market agree.
func (e *env) checkBulk(out []BulkRent, wantFailed int) {
	e.t.Helper()
	ctx := context.Background()
	failed, batch := 0, ""
	for _, o := range out {
		if o.Err != nil {
			if !errors.Is(o.Err, ErrRentFailed) {
				e.t.Errorf("offer %d: %v, want a failure that rented nothing", o.Offer.ID, o.Err)
			}
			failed++
			continue
		}
		it, err := e.st.Intent(ctx, o.Instance.IntentID)
		if err != nil || it.State != store.IntentCreated || it.InstanceID != o.Instance.ID || it.OfferID != o.Offer.ID {
			e.t.Errorf("offer %d: instance %+v, intent %+v, %v", o.Offer.ID, o.Instance, it, err)
		}
		if batch == "" {
			batch = it.BatchLabel
		}
		if it.BatchLabel == "" || it.BatchLabel != batch || it.Label == batch || o.Instance.Label != batch || o.Instance.MachineID != o.Offer.MachineID {
			e.t.Errorf("offer %d: intent labels %q / %q, instance label %q, machine %d", o.Offer.ID, it.Label, it.BatchLabel, o.Instance.Label, o.Instance.MachineID)
		}
	}
	if failed != wantFailed {
		e.t.Errorf("%d offers failed, want %d", failed, wantFailed)
	}
	for offer, n := range e.mkt.CreatesPerOffer() {
		if n != 1 {
			e.t.Errorf("offer %d created %d times", offer, n)
		}
	}
	e.assertNoLeak(e.st)
}

// One bulk create rents six offers, of which one was taken just before:
// the five are recorded each under its own intent, the taken one fails
// and is not rented twice.
func TestRentManyRecordsEachInstance(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	if _, err := e.m.Rent(ctx, e.rentReq(2)); err != nil {
		t.Fatal(err)
	}
	out, err := e.m.RentMany(ctx, e.bulkReq(0, 6))
	if err != nil || len(out) != 6 {
		t.Fatalf("%d outcomes, %v", len(out), err)
	}
	if !errors.Is(out[2].Err, provider.ErrOfferGone) && !errors.Is(out[2].Err, ErrRentFailed) {
		t.Errorf("the taken offer: %v", out[2].Err)
	}
	e.checkBulk(out, 1)
	if n := len(e.ours()); n != 6 {
		t.Errorf("%d instances, want 6 (one single, five of the batch)", n)
	}
}

// The bulk create's answer is lost after it rented: the instances are
// found by listing the batch label, each matched to its intent by machine.
func TestRentManyLostAnswerFoundByListing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{faults: sim.Faults{LostCreate: 1}})
	out, err := e.m.RentMany(context.Background(), e.bulkReq(0, 8))
	if err != nil {
		t.Fatal(err)
	}
	e.checkBulk(out, 0)
}

// A process killed between the bulk create and its records leaves pending
// intents and labelled instances: reconcile adopts each instance under the
// intent of its machine, and abandons the intent whose offer was not rented.
func TestRentManyCrashAdoptedByReconcile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	req := e.bulkReq(0, 5)
	taken, err := e.client.CreateInstance(ctx, req.Offers[4].ID, provider.CreateRequest{Image: "ubuntu", Disk: 20, Label: "someone else"})
	if err != nil {
		t.Fatal(err)
	}
	storeID, _ := e.st.ID(ctx)
	if err := e.m.ensureFleet(ctx, "f1"); err != nil {
		t.Fatal(err)
	}
	var offers []store.IntentOffer
	var ids []int64
	for _, o := range req.Offers {
		offers = append(offers, store.IntentOffer{OfferID: o.ID, MachineID: o.MachineID})
		ids = append(ids, o.ID)
	}
	its, err := e.st.NewIntentBatch(ctx, "f1", offers, nil, e.clock.Now(),
		func(id int64) string { return Label(storeID, "f1", id, "0000000a") },
		func(id int64) string { return Label(storeID, "f1", id, "0000000b") })
	if err != nil {
		t.Fatal(err)
	}
	create := req.Create
	create.Label = its[0].BatchLabel
	if err := e.client.CreateInstances(ctx, ids, create); err != nil {
		t.Fatal(err)
	}
	// killed here
	e.clock.Advance(time.Hour)
	rep, err := e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	adopted, abandoned := 0, 0
	for _, c := range rep.Changes {
		switch c.Kind {
		case ChangeAdopted:
			adopted++
		case ChangeAbandoned:
			abandoned++
			if c.Intent != its[4].ID {
				t.Errorf("abandoned intent %d, want %d (offer %d was taken)", c.Intent, its[4].ID, req.Offers[4].ID)
			}
		}
	}
	if adopted != 4 || abandoned != 1 {
		t.Fatalf("changes %+v", rep.Changes)
	}
	for _, it := range its[:4] {
		got, _ := e.st.Intent(ctx, it.ID)
		in, err := e.st.Instance(ctx, got.InstanceID)
		if err != nil || in.MachineID != it.MachineID || in.OfferID != it.OfferID {
			t.Errorf("intent %d (machine %d): instance %+v, %v", it.ID, it.MachineID, in, err)
		}
	}
	for _, o := range rep.Orphans {
		if o.Instance.ID != taken.NewContract {
			t.Errorf("orphan %+v", o)
		}
	}
}

// A refused bulk create (a wrong key) rents nothing and fails every
// intent; offers twice on one machine are refused before anything is sent.
func TestRentManyRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	bad := e.manager(e.newClient("wrong-key"))
	out, err := bad.RentMany(ctx, e.bulkReq(0, 3))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out {
		if !errors.Is(o.Err, ErrRentFailed) || !errors.Is(o.Err, provider.ErrAuth) {
			t.Errorf("offer %d: %v", o.Offer.ID, o.Err)
		}
	}
	its, _ := e.st.FleetIntents(ctx, "f1")
	for _, it := range its {
		if it.State != store.IntentFailed {
			t.Errorf("intent %d is %s", it.ID, it.State)
		}
	}
	twice := e.bulkReq(0, 2)
	twice.Offers[1].MachineID = twice.Offers[0].MachineID
	if _, err := e.m.RentMany(ctx, twice); err == nil {
		t.Error("two offers of one machine in a batch were accepted")
	}
	if len(e.mkt.CreatesPerOffer()) != 0 {
		t.Errorf("something was rented: %v", e.mkt.CreatesPerOffer())
	}
}
