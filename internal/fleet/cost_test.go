package fleet

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// The simulator's ledger and Cost agree to the cent for a scripted
// timeline: boot, run 1 h, stop 2 h, start, run 30 min, destroy; compute,
// storage and bandwidth (the image pull, as the listing reports it) each.
func TestCostMatchesLedger(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	est := 1.0
	req := e.rentReq(3)
	req.EstCost = &est
	// Transitions are priced when they are observed, so each rent waits
	// for running, as the rent command does.
	e.rentRunning(e.rentReq(4)) // still live at the end
	e.clock.Advance(17 * time.Minute)
	rec := e.rentRunning(req)
	e.clock.Advance(time.Hour)
	if err := e.m.Stop(ctx, []int64{rec.ID}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Hour)
	if err := e.m.Start(ctx, []int64{rec.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.WaitRunning(ctx, rec.ID, WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(30 * time.Minute)
	if err := e.m.Destroy(ctx, []int64{rec.ID}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour) // nothing more may be billed for rec
	if _, err := e.m.Reconcile(ctx, ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}

	ledger := map[int64]map[string]float64{}
	for _, le := range e.mkt.Ledger() {
		if ledger[le.InstanceID] == nil {
			ledger[le.InstanceID] = map[string]float64{}
		}
		ledger[le.InstanceID][le.Kind] += le.Amount
	}
	rep, err := e.m.Cost(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Instances) != 2 {
		t.Fatalf("%d instances in the report", len(rep.Instances))
	}
	cents := func(v float64) int64 { return int64(math.Round(v * 100)) }
	const halfCent = 0.005
	for _, c := range rep.Instances {
		l := ledger[c.InstanceID]
		t.Logf("instance %d: compute %.4f (ledger %.4f), storage %.4f (ledger %.4f), bandwidth %.4f (ledger %.4f), running %s",
			c.InstanceID, c.Compute, l["compute"], c.Storage, l["storage"], c.Bandwidth, l["bandwidth"], c.Running)
		// A start seen by a poll is dated mid-way since the poll before
		// (store.ChangedAt), so each start may be half a poll off.
		if math.Abs(c.Compute-l["compute"]) > halfCent || cents(c.Storage) != cents(l["storage"]) ||
			math.Abs(c.Bandwidth-l["bandwidth"]) > 1e-9 || c.BandwidthEstimated ||
			math.Abs(c.Total-(l["compute"]+l["storage"]+l["bandwidth"])) > halfCent {
			t.Errorf("instance %d: cost %.6f+%.6f+%.6f, ledger %.6f+%.6f+%.6f", c.InstanceID, c.Compute, c.Storage, c.Bandwidth,
				l["compute"], l["storage"], l["bandwidth"])
		}
	}
	var first InstanceCost
	for _, c := range rep.Instances {
		if c.InstanceID == rec.ID {
			first = c
		}
	}
	if first.Live || first.Running < 90*time.Minute || first.Running > 92*time.Minute || first.Estimated == nil || *first.Estimated != 1 {
		t.Errorf("first instance: %+v", first)
	}
	if len(rep.Fleets) != 1 || rep.Fleets[0].N != 2 || rep.Fleets[0].Estimated == nil || math.Abs(rep.Fleets[0].EstOf-first.Total) > 1e-9 {
		t.Errorf("fleets %+v", rep.Fleets)
	}
}

// A fleet waited for together is priced to the cent too: one listing per
// poll sees every instance start.
func TestCostFleetWaitAll(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	var ids []int64
	for i := range 4 {
		rec, err := e.m.Rent(ctx, e.rentReq(i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.ID)
	}
	res, err := e.m.WaitAllRunning(ctx, ids, WaitOptions{})
	if err != nil || len(res) != 4 {
		t.Fatalf("wait: %v %v", res, err)
	}
	for id, err := range res {
		if err != nil {
			t.Fatalf("instance %d: %v", id, err)
		}
	}
	e.clock.Advance(3 * time.Hour)
	if err := e.m.Destroy(ctx, ids); err != nil {
		t.Fatal(err)
	}
	ledger := map[int64]float64{}
	for _, le := range e.mkt.Ledger() {
		ledger[le.InstanceID] += le.Amount
	}
	rep, err := e.m.Cost(ctx, "f1")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, c := range rep.Instances {
		if math.Abs(c.Total-ledger[c.InstanceID]) > 0.005 { // half a poll of compute at most
			t.Errorf("instance %d: cost %.6f, ledger %.6f", c.InstanceID, c.Total, ledger[c.InstanceID])
		}
		sum += ledger[c.InstanceID]
	}
	if len(rep.Fleets) != 1 || math.Abs(rep.Fleets[0].Total-sum) > 0.01 || math.Abs(rep.Total-sum) > 0.01 {
		t.Errorf("fleet total %+v, ledger %.6f", rep.Fleets, sum)
	}
}

func TestInstanceCostOfTimeline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(h float64) time.Time { return t0.Add(time.Duration(h * float64(time.Hour))) }
	in := store.Instance{ID: 1, CreatedAt: t0, DPHTotal: 1.1, StorageDPH: 0.1, GoneAt: at(10)}
	evs := []store.Event{
		{From: "", To: "loading", At: at(0.5)},
		{From: "loading", To: "running", At: at(1)}, // 1 h provisioning+loading: storage only
		{From: "running", To: "offline", At: at(3)}, // 2 h running
		{From: "offline", To: "running", At: at(4)}, // 1 h offline: nothing
		{From: "running", To: "stopped", At: at(5)}, // 1 h running
		{From: "stopped", To: "gone", At: at(10)},   // 5 h stopped: storage only
		{From: "gone", To: "running", At: at(11)},   // after gone: ignored
	}
	c := InstanceCostOf(in, evs, nil, at(20))
	if c.Running != 3*time.Hour || c.Existed != 9*time.Hour {
		t.Fatalf("running %s existed %s", c.Running, c.Existed)
	}
	if math.Abs(c.Compute-3) > 1e-9 || math.Abs(c.Storage-0.9) > 1e-9 || math.Abs(c.Total-3.9) > 1e-9 {
		t.Fatalf("cost %+v", c)
	}
	if got := InstanceCostOf(store.Instance{CreatedAt: t0, DPHTotal: 1, StorageDPH: 0.5, State: "stopped"}, nil, nil, at(2)); got.Total != 1 {
		t.Fatalf("no events: %+v", got)
	}
	// Bids raised at 2 h (running) and 4.5 h (running again): each stretch
	// is billed at the bid then in force, not the whole at the last one.
	// Compute: 1 h at 1.0, 1 h at 1.5, 0.5 h at 1.5, 0.5 h at 2.0.
	raised := in
	raised.DPHTotal = 2.1
	rates := []store.RateChange{
		{At: at(2), FromDPHTotal: 1.1, FromStorageDPH: 0.1, ToDPHTotal: 1.6, ToStorageDPH: 0.1},
		{At: at(4.5), FromDPHTotal: 1.6, FromStorageDPH: 0.1, ToDPHTotal: 2.1, ToStorageDPH: 0.1},
	}
	c = InstanceCostOf(raised, evs, rates, at(20))
	if c.Running != 3*time.Hour || math.Abs(c.Compute-4.25) > 1e-9 || math.Abs(c.Storage-0.9) > 1e-9 {
		t.Fatalf("with raised bids: running %s, compute $%.4f, storage $%.4f; want 3h, $4.25, $0.90", c.Running, c.Compute, c.Storage)
	}
	// A change while stopped bills nothing until the instance runs again.
	stoppedRaise := []store.RateChange{{At: at(7), FromDPHTotal: 1.1, FromStorageDPH: 0.1, ToDPHTotal: 2.1, ToStorageDPH: 0.1}}
	if c := InstanceCostOf(raised, evs, stoppedRaise, at(20)); math.Abs(c.Compute-3) > 1e-9 {
		t.Fatalf("raised while stopped: compute $%.4f, want $3 at the old bid", c.Compute)
	}
}

// BandwidthOf: the estimate until the marketplace reports, then its figure,
// carried on at the host's speed while the last report saw the pull going.
func TestBandwidthOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	billed := func(v float64) *float64 { return &v }
	// 8 GB at $0.01/GB over a 800 Mb/s host: an 80 s pull, $0.001 a second.
	host := store.Bandwidth{DownCost: 0.01, UpCost: 0.02, DownMbps: 800, PullGB: 8}
	withReport := func(b store.Bandwidth, v float64, at time.Time) store.Bandwidth {
		b.Billed, b.BilledAt = billed(v), at
		return b
	}
	cases := []struct {
		name      string
		in        store.Instance
		now       time.Time
		want      float64
		estimated bool
	}{
		{"never reported: the whole pull", store.Instance{State: "", Bandwidth: host}, t0, 0.08, true},
		{"unknown prices and size: nothing", store.Instance{}, t0, 0, true},
		{"reported, pull done", store.Instance{State: "running", Bandwidth: withReport(host, 0.03, t0)}, t0.Add(time.Hour), 0.03, false},
		{"loading, live: carried on to now", store.Instance{State: "loading", Bandwidth: withReport(host, 0.03, t0)}, t0.Add(10 * time.Second), 0.04, false},
		{"loading, carried on no further than the estimate", store.Instance{State: "loading", Bandwidth: withReport(host, 0.03, t0)}, t0.Add(time.Hour), 0.08, false},
		{"loading, destroy asked: carried on to the request", store.Instance{State: "loading", DestroyRequestedAt: t0.Add(20 * time.Second),
			Bandwidth: withReport(host, 0.03, t0)}, t0.Add(time.Hour), 0.05, false},
		{"loading, destroyed: carried on to the destroy, as storage", store.Instance{State: "loading", DestroyRequestedAt: t0.Add(20 * time.Second),
			GoneAt: t0.Add(40 * time.Second), Bandwidth: withReport(host, 0.03, t0)}, t0.Add(time.Hour), 0.07, false},
		{"loading, throttled: carried on at the pace reported", store.Instance{State: "loading", CreatedAt: t0.Add(-60 * time.Second),
			GoneAt: t0.Add(30 * time.Second), Bandwidth: withReport(host, 0.03, t0)}, t0.Add(time.Hour), 0.045, false},
		{"reported above the estimate (a bigger image): as reported", store.Instance{State: "loading", Bandwidth: withReport(host, 0.2, t0)}, t0.Add(time.Hour), 0.2, false},
	}
	for _, c := range cases {
		got, est := BandwidthOf(c.in, c.now)
		if math.Abs(got-c.want) > 1e-9 || est != c.estimated {
			t.Errorf("%s: $%.6f estimated=%v, want $%.6f estimated=%v", c.name, got, est, c.want, c.estimated)
		}
	}
}

// A listing's start_date from the future or from 1970 is clamped to now.
func TestStartTimeClamped(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		start   float64
		want    time.Time
		clamped bool
	}{
		{float64(now.Add(-time.Hour).Unix()), now.Add(-time.Hour), false},
		{float64(now.Add(24 * time.Hour).Unix()), now, true},
		{1, now, true},
		{0, now, false},
	} {
		got, err := startTime(provider.Instance{StartDate: tc.start}, now)
		if !got.Equal(tc.want) || (err != nil) != tc.clamped {
			t.Errorf("start_date %v: %s, %v; want %s clamped=%v", tc.start, got, err, tc.want, tc.clamped)
		}
	}
}

// A bid changed outside vastfleet (the official CLI's change bid) shows in
// the next listing: cost bills the hour before it at the old bid and the
// hour after at the new one, as the simulator's ledger does.
func TestCostDatesARateChangeSeenInAListing(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	req := e.rentReq(0)
	bid := max(req.Offer.MinBid*1.1, 0.05)
	req.Create.Price = &bid
	rec := e.rentRunning(req)
	e.clock.Advance(time.Hour)
	raised := 3 * bid
	if err := e.m.P.(provider.Bidder).ChangeBid(ctx, rec.ID, &raised); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Reconcile(ctx, ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	if err := e.m.Destroy(ctx, []int64{rec.ID}); err != nil {
		t.Fatal(err)
	}
	c, err := e.m.InstanceCost(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	ledger := 0.0
	for _, le := range e.mkt.Ledger() {
		if le.InstanceID == rec.ID && le.Kind == "compute" {
			ledger += le.Amount
		}
	}
	backwards := c.Running.Hours() * raised // the whole run at the new bid
	t.Logf("compute: cost $%.4f, ledger $%.4f (all at the raised bid: $%.4f)", c.Compute, ledger, backwards)
	if math.Abs(c.Compute-ledger) > 0.005 {
		t.Errorf("compute: cost $%.4f, ledger $%.4f", c.Compute, ledger)
	}
	if math.Abs(backwards-ledger) < 0.02 {
		t.Fatalf("the raise changes too little to tell the rules apart: $%.4f against $%.4f", backwards, ledger)
	}
}
