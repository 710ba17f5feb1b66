package coord

import (
	"context"
	"net/http"
	"runtime"
	"testing"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// leaseAs asks for an item as the credential's node.
func (r *rig) leaseAs(tok string) (int, wire.ItemLease) {
	r.t.Helper()
	var l wire.ItemLease
	code, _ := r.do("POST", wire.PathItemsLease, tok, wire.ItemLeaseRequest{Fleet: "alpha", Session: "work"}, &l)
	return code, l
}

// report sends out as the result of the lease.
func (r *rig) report(tok string, l wire.ItemLease, out string) int {
	r.t.Helper()
	code, _ := r.do("POST", wire.PathItemsResult, tok, wire.ItemResult{Fleet: "alpha", Session: "work", ID: l.Item.ID, Lease: l.Lease, StdoutTail: out}, nil)
	return code
}

// Replicas go to distinct machines: a second node on the machine that runs
// an item's first replica never gets the second, and the item is done
// once two machines agree.
func testReplicasGoToDistinctMachines(t *testing.T, backend string) {
	ctx := context.Background()
	// Instances 1 and 2 share machine 500.
	r := newRigOn(t, backend, func(c *Config) { c.Members = testMembers{sameMachine: map[int64]int64{1: 500, 2: 500}} })
	if err := r.db.SetValidation(ctx, "alpha", Validation{Mode: ValidateReplicas, Replicas: 2, Quorum: 2}); err != nil {
		t.Fatal(err)
	}
	if err := r.db.AddItems(ctx, "alpha", []string{"only"}); err != nil {
		t.Fatal(err)
	}
	a, b, c := r.node("a"), r.node("b"), r.node("c") // instances 1, 2 (same machine as a) and 3
	_, la := r.leaseAs(a)
	if la.Item == nil {
		t.Fatal("a got nothing")
	}
	if code, lb := r.leaseAs(b); code != 200 || lb.Item != nil {
		t.Fatalf("b, on a's machine, got %d %+v; want no item", code, lb)
	}
	_, lc := r.leaseAs(c)
	if lc.Item == nil || lc.Item.ID != la.Item.ID {
		t.Fatalf("c got %+v, want the second replica of item %d", lc, la.Item.ID)
	}
	r.report(a, la, "42")
	if _, _, d, _ := r.db.ItemCounts(ctx, "alpha"); d != 0 {
		t.Fatal("done on one replica")
	}
	r.report(c, lc, "42")
	res, err := r.db.ItemResults(ctx, "alpha")
	if err != nil || len(res) != 1 || res[0].StdoutTail != "42" {
		t.Fatalf("results %+v %v", res, err)
	}
	hosts, _ := r.db.HostResults(ctx, "alpha")
	for _, h := range hosts {
		if h.Validated != 1 || h.Rejected != 0 {
			t.Errorf("%+v: want 1 validated", h)
		}
	}
}

// An item whose results disagree on every machine of the fleet is
// starved: validation needs one more machine and none may take it. The
// live totals say so, so the job can stop waiting.
func testItemsStarvedWhenEveryMachineDisagrees(t *testing.T, backend string) {
	ctx := context.Background()
	r := newRigOn(t, backend, nil)
	if err := r.db.SetValidation(ctx, "alpha", Validation{Mode: ValidateReplicas, Replicas: 2, Quorum: 2}); err != nil {
		t.Fatal(err)
	}
	if err := r.db.AddItems(ctx, "alpha", []string{"one", "two"}); err != nil {
		t.Fatal(err)
	}
	a, b := r.node("a"), r.node("b")
	_, la := r.leaseAs(a)
	_, lb := r.leaseAs(b)
	if la.Item == nil || lb.Item == nil || la.Item.ID != lb.Item.ID {
		t.Fatalf("leases %+v %+v, want both replicas of one item", la, lb)
	}
	r.report(a, la, "41")
	r.report(b, lb, "42")
	r.srv.sweepItems()
	tot := r.srv.Snapshot(ctx, "alpha").Totals
	if tot.ItemsLeft != 2 || tot.ItemsStarved != 1 {
		t.Fatalf("totals %+v: want 2 left, 1 starved (the disputed item; the other may still run)", tot)
	}
	// A third machine enrolls: the item may run there, nothing is starved.
	r.node("c")
	r.srv.sweepItems()
	if tot := r.srv.Snapshot(ctx, "alpha").Totals; tot.ItemsStarved != 0 {
		t.Fatalf("totals %+v with a third machine: want none starved", tot)
	}
}

// A verify command (run here, with the result's stdout tail on stdin)
// rejects a wrong result: the item is leased again to another machine,
// the host goes on the bad-host list, and gets no more items. A finding
// the command rejects is acknowledged but not stored.
func testVerifyRejectsWrongResultsAndFindings(t *testing.T, backend string) {
	if runtime.GOOS == "windows" {
		t.Skip("the verify command runs with /bin/sh")
	}
	ctx := context.Background()
	sink := &badSink{}
	r := newRigOn(t, backend, func(c *Config) { c.BadHosts = sink })
	// A result is valid when its stdout is the item's value doubled; a
	// finding when its data says ok.
	verify := `read -r got; case "$VASTFLEET_FINDING_KEY" in ?*) [ "$got" = '{"ok":true}' ];; *) [ "$got" = "$VASTFLEET_ITEM$VASTFLEET_ITEM" ];; esac`
	if err := r.db.SetValidation(ctx, "alpha", Validation{Verify: verify}); err != nil {
		t.Fatal(err)
	}
	if err := r.db.AddItems(ctx, "alpha", []string{"abc", "xyz"}); err != nil {
		t.Fatal(err)
	}
	liar, honest := r.node("liar"), r.node("honest")
	_, l := r.leaseAs(liar)
	if code := r.report(liar, l, "wrong"); code != 200 {
		t.Fatalf("liar's result: %d", code)
	}
	if code, _ := r.leaseAs(liar); code != http.StatusForbidden {
		t.Fatalf("caught liar leases: %d, want 403", code)
	}
	if _, ok := sink.got[101]; !ok {
		t.Fatalf("bad-host list %v lacks the liar's machine 101", sink.got)
	}
	for range 2 {
		_, l := r.leaseAs(honest)
		if l.Item == nil {
			t.Fatal("the honest node got no item: the rejected one was not leased again")
		}
		want := l.Item.Value + l.Item.Value
		if code := r.report(honest, l, want); code != 200 {
			t.Fatalf("honest result: %d", code)
		}
	}
	res, _ := r.db.ItemResults(ctx, "alpha")
	if len(res) != 2 || res[0].StdoutTail != "abcabc" || res[1].StdoutTail != "xyzxyz" {
		t.Fatalf("results %+v", res)
	}
	var ack wire.FindingsAck
	fs := findings("alpha", "honest", "good", "bad")
	fs.Items[0].Data = []byte(`{"ok":true}`)
	fs.Items[1].Data = []byte(`{"ok":false}`)
	if code, _ := r.do("POST", wire.PathFindings, honest, fs, &ack); code != 200 || len(ack.Acked) != 2 || len(ack.Rejected) != 1 || ack.Rejected[0] != "bad" {
		t.Fatalf("findings: %d %+v", code, ack)
	}
	if n, _ := r.db.CountFindings(ctx, "alpha"); n != 1 {
		t.Fatalf("%d findings stored, want the good one", n)
	}
}

// A trusted host's results are taken unchecked; a spot check (an item
// with a validated answer, sent again unmarked) catches it lying, and its
// unchecked results go back to the queue for two other machines.
func testSpotCheckCatchesATrustedLiarAndItsResultsAreRechecked(t *testing.T, backend string) {
	ctx := context.Background()
	coin := 0.99 // >= 1/n: a trusted host is not replicated; > Spot: no spot check
	sink := &badSink{}
	r := newRigOn(t, backend, func(c *Config) { c.Rand = func() float64 { return coin }; c.BadHosts = sink })
	if err := r.db.SetValidation(ctx, "alpha", Validation{Mode: ValidateAdaptive, Spot: 0.5}); err != nil {
		t.Fatal(err)
	}
	if err := r.db.AddItems(ctx, "alpha", []string{"v1", "v2", "v3", "v4"}); err != nil {
		t.Fatal(err)
	}
	a, b, liar := r.node("a"), r.node("b"), r.node("liar") // machines 101, 102, 103
	// The liar's machine has earned trust on this image.
	if _, err := r.db.db.ExecContext(t.Context(), `INSERT INTO trust (host, image, consecutive, valid) VALUES ('machine 103', 'img', 50, 50)`); err != nil {
		t.Fatal(err)
	}
	// a and b agree on item 1 (untrusted: replicated): a validated answer.
	_, la := r.leaseAs(a)
	r.report(a, la, "ans-"+la.Item.Value)
	_, lb := r.leaseAs(b)
	if lb.Item.ID != la.Item.ID {
		t.Fatalf("b got item %d, want item %d's replica", lb.Item.ID, la.Item.ID)
	}
	r.report(b, lb, "ans-"+lb.Item.Value)
	// The trusted liar's wrong answers are taken unchecked.
	for range 2 {
		_, l := r.leaseAs(liar)
		r.report(liar, l, "lie")
	}
	if _, _, d, _ := r.db.ItemCounts(ctx, "alpha"); d != 3 {
		t.Fatalf("%d done, want 3 (1 validated, 2 on trust)", d)
	}
	// A spot check: the liar gets validated item 1 again, unmarked.
	coin = 0
	_, spot := r.leaseAs(liar)
	if spot.Item == nil || spot.Item.ID != la.Item.ID {
		t.Fatalf("spot check leased %+v, want item %d", spot.Item, la.Item.ID)
	}
	r.report(liar, spot, "lie")
	if _, ok := sink.got[103]; !ok {
		t.Fatalf("bad-host list %v lacks the liar's machine 103", sink.got)
	}
	// Its two unchecked results are doubted: back in the queue.
	if q, _, d, _ := r.db.ItemCounts(ctx, "alpha"); d != 1 || q != 3 {
		t.Fatalf("after the catch: %d queued, %d done; want 3 and 1", q, d)
	}
	coin = 0.99
	for _, tok := range []string{a, b, a, b, a, b} {
		code, l := r.leaseAs(tok)
		if code != 200 || l.Item == nil {
			continue
		}
		r.report(tok, l, "ans-"+l.Item.Value)
	}
	res, _ := r.db.ItemResults(ctx, "alpha")
	for _, x := range res {
		if x.StdoutTail != "ans-"+x.Value {
			t.Errorf("item %d kept %q", x.ID, x.StdoutTail)
		}
	}
	hosts, _ := r.db.HostResults(ctx, "alpha")
	for _, h := range hosts {
		if h.Host == "machine 103" && (h.Rejected != 1 || h.Unchecked != 2 || h.Caught == "") {
			t.Errorf("liar's record %+v: want 1 rejected, 2 unchecked (doubted), caught", h)
		}
	}
}
