package launch

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch/launchsim"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// ledgerByKind sums the simulator's charges for instances of fleet (every
// instance the store knows under that fleet) per kind.
func ledgerByKind(t *testing.T, e *launchsim.Env, fleetName string) map[string]float64 {
	t.Helper()
	rep, err := e.M.Cost(context.Background(), fleetName)
	if err != nil {
		t.Fatal(err)
	}
	ours := map[int64]bool{}
	for _, c := range rep.Instances {
		ours[c.InstanceID] = true
	}
	out := map[string]float64{}
	for _, le := range e.Mkt.Ledger() {
		if ours[le.InstanceID] {
			out[le.Kind] += le.Amount
		}
	}
	return out
}

// A launch of 50 with failures (boots that fail, hosts stuck loading, slow
// pulls) and then everything destroyed: `cost` agrees with the simulator's
// ledger to the cent on compute, storage and bandwidth each, and says so in
// its JSON under one name per part.
func TestCostMatchesLedgerForLaunchOf50(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: statistics over many rentals, not concurrency; the plain run covers it")
	}
	e := newTestEnv(t, 21, sim.Faults{StuckLoading: 0.08, BootFail: 0.08, SlowBoot: 0.15})
	ctx := context.Background()
	spec := baseSpec("fifty", 50)
	spec.Create.Image = "pytorch/pytorch:latest"
	spec.ImageGB = 8
	spec.Deadline = 15 * time.Minute
	// Compute is priced from the states listings show: a boot seen by a
	// poll is dated mid-way since the poll before (store.ChangedAt), so
	// each boot is up to half a poll off and the errors mostly cancel.
	spec.PollEvery = 5 * time.Second
	sum, err := Run(ctx, e.M, spec, launchsim.Candidates(e.Mkt, 10), nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Ready != 50 {
		t.Fatalf("%d ready of 50", sum.Ready)
	}
	e.Clock.Advance(20 * time.Minute) // the fleet runs a while
	if err := e.M.Destroy(ctx, sum.ReadyIDs); err != nil {
		t.Fatal(err)
	}
	if _, err := e.M.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := e.M.Cost(ctx, "fifty")
	if err != nil {
		t.Fatal(err)
	}
	ledger := ledgerByKind(t, e, "fifty")
	t.Logf("launch of 50 (%d rented): cost compute $%.4f storage $%.4f bandwidth $%.4f total $%.4f; ledger compute $%.4f storage $%.4f bandwidth $%.4f total $%.4f",
		sum.Rented, rep.Compute, rep.Storage, rep.Bandwidth, rep.Total,
		ledger["compute"], ledger["storage"], ledger["bandwidth"], ledger["compute"]+ledger["storage"]+ledger["bandwidth"])
	for _, part := range []struct {
		name      string
		cost, led float64
	}{{"compute", rep.Compute, ledger["compute"]}, {"storage", rep.Storage, ledger["storage"]}, {"bandwidth", rep.Bandwidth, ledger["bandwidth"]},
		{"total", rep.Total, ledger["compute"] + ledger["storage"] + ledger["bandwidth"]}} {
		if math.Abs(part.cost-part.led) >= 0.01 {
			t.Errorf("%s: cost $%.4f, ledger $%.4f", part.name, part.cost, part.led)
		}
	}
	if ledger["bandwidth"] < 0.01 {
		t.Errorf("the ledger billed only $%.4f of bandwidth: the test does not exercise it", ledger["bandwidth"])
	}
	for _, c := range rep.Instances {
		if c.BandwidthEstimated {
			t.Errorf("instance %d: bandwidth still estimated after the marketplace reported it", c.InstanceID)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"compute":`, `"storage":`, `"bandwidth":`, `"bandwidth_estimated":`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("cost JSON lacks %s", key)
		}
	}
}

// With no deadline and every boot failing, replacements stop at the rental
// bound and the summary names it.
func TestRentalsStopAtTheBound(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 6, sim.Faults{BootFail: 1})
	spec := baseSpec("bounded", 3)
	spec.Deadline = 0
	spec.BootTimeout = 10 * time.Minute
	sum, err := Run(context.Background(), e.M, spec, launchsim.Candidates(e.Mkt, 10), nil)
	if err != nil {
		t.Fatal(err)
	}
	bound := DefaultMaxRentals(3)
	created := 0
	for _, n := range e.Mkt.CreatesPerOffer() {
		created += n
	}
	if sum.Rented != bound || created != bound || sum.Ready != 0 {
		t.Errorf("rented %d (marketplace: %d), ready %d; want the bound of %d and none ready", sum.Rented, created, sum.Ready, bound)
	}
	if !strings.Contains(sum.StoppedAtCap, "rental bound") || !strings.Contains(sum.StoppedAtCap, "--max-rentals 13") {
		t.Errorf("summary does not name the bound: %q", sum.StoppedAtCap)
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

// A budget that leaves room for the $/hr but not for every image pull:
// the launch stops before the marketplace's bill (bandwidth included)
// crosses it.
func TestBudgetCountsBandwidth(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 8, sim.Faults{StuckLoading: 0.3, BootFail: 0.2})
	ctx := context.Background()
	cands := launchsim.Candidates(e.Mkt, 10)
	spec := baseSpec("pulls", 5)
	spec.Create.Image = "pytorch/pytorch:latest"
	spec.ImageGB = 8
	spec.Deadline = 0
	spec.BootTimeout = 5 * time.Minute
	ordered, _, _, err := rentOrder(spec.WithDefaults(), cands)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := CheckCaps(spec, ordered, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Bandwidth <= 0 {
		t.Fatalf("the plan counts no bandwidth: %+v", plan)
	}
	// Room for the first five and about one replacement.
	spec.Budget = plan.Projected + plan.Bandwidth/5
	sum, err := Run(ctx, e.M, spec, cands, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.M.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	ledger := ledgerByKind(t, e, "pulls")
	billed := ledger["compute"] + ledger["storage"] + ledger["bandwidth"]
	t.Logf("budget $%.4f (projection $%.4f, pulls $%.4f): ledger $%.4f (bandwidth $%.4f), %d rented, %d ready, stopped at %q",
		spec.Budget, plan.Projected, plan.Bandwidth, billed, ledger["bandwidth"], sum.Rented, sum.Ready, sum.StoppedAtCap)
	if billed > spec.Budget {
		t.Errorf("the marketplace billed $%.4f, above the $%.4f budget", billed, spec.Budget)
	}
	// Room for about one more full pull: failures found early paid only
	// part of theirs, which makes room for more replacements, but the
	// budget, pulls counted, must be what stopped the renting.
	if sum.StoppedAtCap == "" || !strings.Contains(sum.StoppedAtCap, "budget") {
		t.Errorf("%d rented, %d ready, stopped at %q: want the budget to stop the renting", sum.Rented, sum.Ready, sum.StoppedAtCap)
	}
}

// A parked launch releases as soon as the count is up, in the very tick
// that the last instances boot: those are parked and started again before
// any listing shows them stopped. The store has each of their stops (cost
// ends compute there) and each of their starts: the launch's own view of
// a node follows the park it recorded, so the listing that shows the node
// running again is written down. Before, the store kept those nodes
// stopped until someone listed the account again, and cost left out all
// the compute they billed meanwhile.
func TestParkedAndReleasedInOneTickBillsCompute(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 4, sim.Faults{})
	ctx := context.Background()
	spec := baseSpec("onetick", 12)
	spec.Park, spec.ParkAll = true, true
	spec.Deadline = 30 * time.Minute
	sum, err := Run(ctx, e.M, spec, launchsim.Candidates(e.Mkt, 12), nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Ready != 12 {
		t.Fatalf("%d ready of 12", sum.Ready)
	}
	// No listing after the launch: what the store holds is what the launch
	// recorded.
	e.Clock.Advance(30 * time.Minute)
	rep, err := e.M.Cost(ctx, "onetick")
	if err != nil {
		t.Fatal(err)
	}
	charged := map[int64]float64{}
	for _, le := range e.Mkt.Ledger() {
		if le.Kind == "compute" {
			charged[le.InstanceID] += le.Amount
		}
	}
	ready := map[int64]bool{}
	for _, id := range sum.ReadyIDs {
		ready[id] = true
	}
	for _, c := range rep.Instances {
		if ready[c.InstanceID] && c.State != "running" {
			t.Errorf("instance %d: ready, and the store holds it %s", c.InstanceID, c.State)
		}
		if d := charged[c.InstanceID] - c.Compute; math.Abs(d) >= 0.01 {
			t.Errorf("instance %d (%s): compute $%.4f, the marketplace charged $%.4f", c.InstanceID, c.State, c.Compute, charged[c.InstanceID])
		}
	}
}

// Instances the launch destroys (failed boots, surplus) are destroyed in
// the background while the launch keeps listing: a listing that no longer
// shows one dates it gone where its destroy went out, as the simulator's
// ledger ends it, not at that listing (which billed up to a tick more of
// storage and of the pull it cut short).
func TestDestroyedDuringTheLaunchGoneAtTheDestroy(t *testing.T) {
	t.Parallel()
	// After each destroy the next listings fail a while (a marketplace
	// having a bad minute): the destroy's own confirmation gives up for a
	// poll, and the launch's next listing is the first to see it gone.
	var failLists atomic.Int32
	e, err := launchsim.NewWrapped(context.Background(), 5, 3000, sim.Faults{BootFail: 0.3, StuckLoading: 0.1}, t.TempDir(),
		func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodDelete:
					failLists.Store(6)
				case r.Method == http.MethodGet && r.URL.Path == "/api/v1/instances/" && failLists.Add(-1) >= 0:
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusInternalServerError)
					io.WriteString(w, `{"success":false,"error":"server_error","msg":"boom"}`)
					return
				}
				next.ServeHTTP(w, r)
			})
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ctx := context.Background()
	spec := baseSpec("gone", 20)
	spec.Create.Image = "pytorch/pytorch:latest"
	spec.ImageGB = 8
	spec.Deadline = 20 * time.Minute
	if _, err := Run(ctx, e.M, spec, launchsim.Candidates(e.Mkt, 10), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.M.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	ended := map[int64]time.Time{}
	for _, le := range e.Mkt.Ledger() {
		if le.Kind == "storage" && le.To.After(ended[le.InstanceID]) {
			ended[le.InstanceID] = le.To
		}
	}
	rep, err := e.M.Cost(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	gone, late := 0, 0
	for _, c := range rep.Instances {
		if c.Live {
			continue
		}
		gone++
		if d := c.StorageSpan.To.Sub(ended[c.InstanceID]); d > time.Second || d < -time.Second {
			late++
			t.Logf("instance %d: cost ends storage %s after the ledger", c.InstanceID, d)
		}
	}
	if gone < 5 {
		t.Fatalf("%d instances destroyed: the test does not exercise it", gone)
	}
	// A destroy whose answer the listing beats by a hair may still be
	// dated at the listing; one in ten is the bound.
	if late > gone/10 {
		t.Errorf("%d of %d destroyed instances end more than a second off the ledger", late, gone)
	}
}
