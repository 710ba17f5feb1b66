package fleet

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

// snapshot is what a reconcile may change in the store.
func snapshot(t *testing.T, st *store.Store) ([]store.Instance, []store.Intent) {
	t.Helper()
	ctx := context.Background()
	ins, err := st.Instances(ctx, store.InstanceFilter{IncludeGone: true})
	if err != nil {
		t.Fatal(err)
	}
	its, err := st.FleetIntents(ctx, "f1")
	if err != nil {
		t.Fatal(err)
	}
	return ins, its
}

func rentN(t *testing.T, e *env, n int) []store.Instance {
	t.Helper()
	var out []store.Instance
	for i := range n {
		rec, err := e.m.Rent(context.Background(), e.rentReq(i))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// Reconcile adopts, marks gone and abandons; a second reconcile right after
// changes nothing.
func TestReconcileIdempotent(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	recs := rentN(t, e, 3)

	// A crash between create and record: intent written, instance created
	// with its label, never recorded.
	it, err := e.st.NewIntent(ctx, "f1", e.offers[5].ID, e.offers[5].MachineID, nil, e.clock.Now(),
		e.labelFor("f1"))
	if err != nil {
		t.Fatal(err)
	}
	created, err := e.client.CreateInstance(ctx, e.offers[5].ID, provider.CreateRequest{Image: "ubuntu", Disk: 20, Label: it.Label})
	if err != nil {
		t.Fatal(err)
	}
	// A crash before the create: an intent whose label never appears.
	if _, err := e.st.NewIntent(ctx, "f1", e.offers[6].ID, e.offers[6].MachineID, nil, e.clock.Now(),
		e.labelFor("f1")); err != nil {
		t.Fatal(err)
	}
	// One of ours destroyed behind vastfleet's back, and an instance rented
	// by hand (no vastfleet label).
	if err := e.client.DestroyInstance(ctx, recs[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateInstance(ctx, e.offers[7].ID, provider.CreateRequest{Image: "ubuntu", Disk: 20, Label: "my notebook"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(DefaultGrace + time.Minute)

	rep, err := e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]int64{}
	for _, c := range rep.Changes {
		id := c.Instance
		if id == 0 {
			id = c.Intent
		}
		kinds[c.Kind] = append(kinds[c.Kind], id)
	}
	if got := kinds[ChangeAdopted]; len(got) != 1 || got[0] != created.NewContract {
		t.Errorf("adopted %v, want [%d]", got, created.NewContract)
	}
	if got := kinds[ChangeGone]; len(got) != 1 || got[0] != recs[0].ID {
		t.Errorf("gone %v, want [%d]", got, recs[0].ID)
	}
	if got := kinds[ChangeAbandoned]; len(got) != 1 {
		t.Errorf("abandoned %v, want one", got)
	}
	if rep.Unmanaged != 1 || len(rep.Orphans) != 0 {
		t.Errorf("unmanaged %d orphans %v", rep.Unmanaged, rep.Orphans)
	}
	e.assertNoLeak(e.st)

	ins1, its1 := snapshot(t, e.st)
	rep2, err := e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep2.Changes) != 0 || len(rep2.Errors) != 0 {
		t.Fatalf("second reconcile changed %v (errors %v)", rep2.Changes, rep2.Errors)
	}
	ins2, its2 := snapshot(t, e.st)
	// last_seen_at moves; nothing else may.
	for i := range ins2 {
		ins2[i].LastSeenAt = ins1[i].LastSeenAt
	}
	if d := cmp.Diff(ins1, ins2); d != "" {
		t.Errorf("second reconcile changed instances:\n%s", d)
	}
	if d := cmp.Diff(its1, its2); d != "" {
		t.Errorf("second reconcile changed intents:\n%s", d)
	}
}

// A failed, short or wrong-account listing changes nothing.
func TestReconcileUntrustedListingChangesNothing(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	rentN(t, e, 30) // two pages
	if _, err := e.m.Reconcile(ctx, ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	// Destroy half behind our back: only a trusted listing may say so.
	for _, s := range e.ours()[:15] {
		if err := e.client.DestroyInstance(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(DefaultGrace + time.Minute)
	before, _ := snapshot(t, e.st)

	cases := []struct {
		name string
		set  func(g *gate)
		want error
	}{
		{"failing", func(g *gate) { g.failLists = 1000 }, provider.ErrServer},
		{"short", func(g *gate) { g.shortLists = 1000 }, provider.ErrIncompleteListing},
		{"wrong account", func(g *gate) { g.userID = 99 }, ErrWrongAccount},
	}
	for _, c := range cases {
		e.gate.set(func(g *gate) { g.reset(); c.set(g) })
		rep, err := e.m.Reconcile(ctx, ReconcileOptions{})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		if len(rep.Changes) != 0 {
			t.Errorf("%s: changes %v", c.name, rep.Changes)
		}
		after, _ := snapshot(t, e.st)
		if d := cmp.Diff(before, after); d != "" {
			t.Errorf("%s: store changed:\n%s", c.name, d)
		}
	}
	// A revoked key answered as 404 + auth_error is not "instance gone".
	bad := e.manager(e.newClient("revoked"))
	badEnv := newEnv(t, envOpts{faults: sim.Faults{AuthAs404: true}, noStore: true})
	bad.P = badEnv.newClient("revoked")
	if _, err := bad.Reconcile(ctx, ReconcileOptions{}); !errors.Is(err, provider.ErrAuth) {
		t.Errorf("revoked key: err = %v", err)
	}
	after, _ := snapshot(t, e.st)
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("revoked key: store changed:\n%s", d)
	}

	e.gate.set(func(g *gate) { g.reset() })
	rep, err := e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gone := 0
	for _, c := range rep.Changes {
		if c.Kind == ChangeGone {
			gone++
		}
	}
	if gone != 15 {
		t.Fatalf("trusted listing: %d gone, want 15: %v", gone, rep.Changes)
	}
}

// A new instance's absence from a listing means nothing during the grace
// period; a pending intent is not abandoned during it either.
func TestReconcileGracePeriod(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	recs := rentN(t, e, 2)
	e.gate.set(func(g *gate) { g.hide = map[int64]bool{recs[0].ID: true} })
	if _, err := e.st.NewIntent(ctx, "f1", e.offers[9].ID, 0, nil, e.clock.Now(),
		e.labelFor("f1")); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(DefaultGrace - time.Second)
	rep, err := e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Changes {
		if c.Kind == ChangeGone || c.Kind == ChangeAbandoned {
			t.Fatalf("within grace: %v", c)
		}
	}
	e.clock.Advance(2 * time.Second)
	rep, err = e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var gone, abandoned int
	for _, c := range rep.Changes {
		switch c.Kind {
		case ChangeGone:
			gone++
		case ChangeAbandoned:
			abandoned++
		}
	}
	if gone != 1 || abandoned != 1 {
		t.Fatalf("after grace: %v", rep.Changes)
	}
	// It shows up again: a listing beats our belief.
	e.gate.set(func(g *gate) { g.hide = nil })
	rep, err = e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil || len(rep.Changes) != 1 || rep.Changes[0].Kind != ChangeRevived {
		t.Fatalf("revive: %v %v", rep.Changes, err)
	}
	e.assertNoLeak(e.st)
}

// An instance labelled by this store but unknown to it is an orphan: listed,
// destroyed only with DestroyOrphans. One labelled by another data dir's
// store is foreign: listed, destroyed only with DestroyForeign.
func TestReconcileOrphans(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	orphan, err := e.client.CreateInstance(ctx, e.offers[0].ID, provider.CreateRequest{Image: "ubuntu", Disk: 20, Label: e.labelFor("other")(77)})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := e.client.CreateInstance(ctx, e.offers[1].ID, provider.CreateRequest{Image: "ubuntu", Disk: 20, Label: Label("ffffffff", "f1", 1, "")})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil || len(rep.Orphans) != 2 || len(rep.Changes) != 0 {
		t.Fatalf("report %+v, %v", rep, err)
	}
	for _, o := range rep.Orphans {
		if want := o.Instance.ID == foreign.NewContract; o.Foreign != want {
			t.Errorf("orphan %d: Foreign = %v, want %v", o.Instance.ID, o.Foreign, want)
		}
	}
	if len(e.ours()) != 2 {
		t.Fatal("orphan destroyed without DestroyOrphans")
	}
	rep, err = e.m.Reconcile(ctx, ReconcileOptions{DestroyOrphans: true})
	if err != nil || len(rep.Changes) != 1 || rep.Changes[0].Kind != ChangeDestroyed || rep.Changes[0].Instance != orphan.NewContract {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if ours := e.ours(); len(ours) != 1 || ours[0].ID != foreign.NewContract {
		t.Fatalf("after DestroyOrphans: %v, want only the foreign instance left", ours)
	}
	rep, err = e.m.Reconcile(ctx, ReconcileOptions{DestroyForeign: true})
	if err != nil || len(rep.Changes) != 1 || rep.Changes[0].Instance != foreign.NewContract {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if len(e.ours()) != 0 {
		t.Fatal("foreign instance still there")
	}
	rep, err = e.m.Reconcile(ctx, ReconcileOptions{DestroyOrphans: true, DestroyForeign: true})
	if err != nil || len(rep.Changes) != 0 {
		t.Fatalf("last reconcile: %+v, %v", rep, err)
	}
}

// A row the client quarantined (a count as a word) is listed but
// unreadable: reconcile keeps the instance, marks it "unknown" with its
// last address, never counts it gone or adopts it, and uses the rest of
// the listing (an instance destroyed behind our back is still found gone).
func TestReconcileKeepsQuarantinedRowsUnknown(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	recs := rentN(t, e, 3)
	if _, err := e.m.Reconcile(ctx, ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	// An intent whose instance exists but is only ever listed odd.
	it, err := e.st.NewIntent(ctx, "f1", e.offers[5].ID, e.offers[5].MachineID, nil, e.clock.Now(), e.labelFor("f1"))
	if err != nil {
		t.Fatal(err)
	}
	created, err := e.client.CreateInstance(ctx, e.offers[5].ID, provider.CreateRequest{Image: "ubuntu", Disk: 20, Label: it.Label})
	if err != nil {
		t.Fatal(err)
	}
	before, err := e.st.Instance(ctx, recs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.client.DestroyInstance(ctx, recs[1].ID); err != nil {
		t.Fatal(err)
	}
	e.gate.set(func(g *gate) { g.oddRows = map[int64]bool{recs[0].ID: true, created.NewContract: true} })
	e.clock.Advance(DefaultGrace + time.Minute)

	rep, err := e.m.Reconcile(ctx, ReconcileOptions{DestroyOrphans: true})
	if err != nil {
		t.Fatalf("a quarantined row failed the reconcile: %v", err)
	}
	for _, c := range rep.Changes {
		if c.Instance == recs[0].ID && c.Kind == ChangeGone || c.Instance == created.NewContract && c.Kind != "" {
			t.Errorf("quarantined row acted on: %+v", c)
		}
	}
	gone := false
	for _, c := range rep.Changes {
		gone = gone || c.Kind == ChangeGone && c.Instance == recs[1].ID
	}
	if !gone {
		t.Errorf("the rest of the listing was not used: %d not found gone in %v", recs[1].ID, rep.Changes)
	}
	if !slices.Contains(rep.Quarantined, recs[0].ID) || !slices.Contains(rep.Quarantined, created.NewContract) {
		t.Errorf("report's quarantined rows %v, want %d and %d", rep.Quarantined, recs[0].ID, created.NewContract)
	}
	after, err := e.st.Instance(ctx, recs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !after.GoneAt.IsZero() || after.State != provider.StateUnknown || after.SSHHost != before.SSHHost || after.SSHPort != before.SSHPort {
		t.Errorf("quarantined instance recorded as gone %v state %q ssh %s:%d; want live, unknown, %s:%d",
			after.GoneAt, after.State, after.SSHHost, after.SSHPort, before.SSHHost, before.SSHPort)
	}
	if _, err := e.st.Instance(ctx, created.NewContract); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a quarantined row was adopted: %v", err)
	}
	if in, err := e.client.ShowInstance(ctx, created.NewContract); err != nil || in.ID != created.NewContract {
		t.Errorf("a quarantined row was destroyed: %v", err)
	}
}
