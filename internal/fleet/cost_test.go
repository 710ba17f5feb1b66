package fleet

import (
	"context"
	"math"
	"testing"
	"time"
)

// The simulator's ledger and Cost agree to the cent for a scripted
// timeline: boot, run 1 h, stop 2 h, start, run 30 min, destroy.
// Bandwidth (the image pull) is billed by the marketplace but unknown to
// vastfleet; compute and storage are compared.
func TestCostMatchesLedger(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	est := 1.0
	req := e.rentReq(3)
	req.EstCost = &est
	// Transitions are priced when they are observed, so each rent waits
	// for running, as the rent command does.
	other, err := e.m.Rent(ctx, e.rentReq(4)) // still live at the end
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.WaitRunning(ctx, other.ID, WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(17 * time.Minute)
	rec, err := e.m.Rent(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.WaitRunning(ctx, rec.ID, WaitOptions{}); err != nil {
		t.Fatal(err)
	}
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
	for _, c := range rep.Instances {
		l := ledger[c.InstanceID]
		t.Logf("instance %d: compute %.4f (ledger %.4f), storage %.4f (ledger %.4f), bandwidth %.4f (ledger only), running %s",
			c.InstanceID, c.Compute, l["compute"], c.Storage, l["storage"], l["bandwidth"], c.Running)
		if cents(c.Compute) != cents(l["compute"]) || cents(c.Storage) != cents(l["storage"]) ||
			math.Abs(c.Total-(l["compute"]+l["storage"])) > 1e-6 {
			t.Errorf("instance %d: cost %.6f+%.6f, ledger %.6f+%.6f", c.InstanceID, c.Compute, c.Storage, l["compute"], l["storage"])
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
