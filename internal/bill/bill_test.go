package bill

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

const testKey = "test-key-0123456789"

// env is a simulated market on a manual clock, reached over loopback HTTP
// by the real client, with a real store and a fleet manager.
type env struct {
	t      *testing.T
	clock  *clock.Manual
	mkt    *sim.Market
	client *vast.Client
	m      *fleet.Manager
	offers []market.Offer
	// charges, when set, answers GET /api/v0/charges/ instead of the
	// simulator.
	charges atomic.Pointer[string]
}

func newEnv(t *testing.T, seed int64) *env {
	t.Helper()
	return newEnvWith(t, seed, sim.Faults{RivalShare: 1e-9})
}

// newEnvWith is newEnv on a market with faults.
func newEnvWith(t *testing.T, seed int64, faults sim.Faults) *env {
	t.Helper()
	e := &env{t: t, clock: clock.NewManual(time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC))}
	mkt, err := sim.New(sim.Config{Seed: seed, Offers: 300, Clock: e.clock, APIKey: testKey, Faults: faults, IDBase: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.mkt = mkt
	h := mkt.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body := e.charges.Load(); body != nil && r.URL.Path == "/api/v0/charges/" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, *body)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.client, err = vast.New(vast.Options{BaseURL: srv.URL, APIKey: testKey, Timeout: 5 * time.Second,
		Clock: clock.Stepped{M: e.clock}, Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), t.TempDir()+"/vastfleet.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.m = &fleet.Manager{P: e.client, S: st, Clock: envClock{e}, Log: slog.New(slog.DiscardHandler)}
	machines := map[int64]bool{}
	for _, off := range mkt.Offers() {
		if off.DiskSpace >= 20 && off.NumGPUs > 0 && off.DPHTotal < 2 && !machines[off.MachineID] {
			machines[off.MachineID] = true
			b, _ := json.Marshal(off)
			var o market.Offer
			if err := json.Unmarshal(b, &o); err != nil {
				t.Fatal(err)
			}
			e.offers = append(e.offers, o)
		}
	}
	return e
}

// envClock moves the market's clock by the manager's waits, stopping at
// the next moment the simulator changes an instance by itself.
type envClock struct{ e *env }

func (c envClock) Now() time.Time { return c.e.clock.Now() }

func (c envClock) Sleep(ctx context.Context, d time.Duration) error {
	now := c.e.clock.Now()
	until := now.Add(d)
	for _, s := range c.e.mkt.State() {
		if !s.Destroyed && !s.ReadyAt.IsZero() && s.ReadyAt.After(now) && s.ReadyAt.Before(until) {
			until = s.ReadyAt
		}
	}
	c.e.clock.Set(until)
	return ctx.Err()
}

// rent rents offer i into fleet f (at bid when non-nil) and waits until it
// runs.
func (e *env) rent(i int, f string, bid *float64) int64 {
	e.t.Helper()
	ctx := context.Background()
	rec, err := e.m.Rent(ctx, fleet.RentRequest{Fleet: f, Offer: e.offers[i],
		Create: provider.CreateRequest{Image: "ubuntu:22.04", Disk: 20, Runtype: "ssh", Price: bid}})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.m.WaitRunning(ctx, rec.ID, fleet.WaitOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return rec.ID
}

func (e *env) reconcile() {
	e.t.Helper()
	if _, err := e.m.Reconcile(context.Background(), fleet.ReconcileOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func find(rep Report, id int64) Instance {
	for _, in := range rep.Instances {
		if in.ID == id {
			return in
		}
	}
	return Instance{}
}

func explanations(in Instance) map[string]string {
	out := map[string]string{}
	for _, l := range in.Lines {
		out[l.Kind] = l.Explanation
	}
	return out
}

// TestReconcileWithTheSimulator: over a day that crosses midnight,
// instances run, stop, start and are destroyed through vastfleet and agree
// with the simulator's charges within a cent; an instance destroyed behind
// vastfleet's back shows the stretch it was not charged for, a bid changed
// behind its back a rate change, and an instance rented outside vastfleet
// a charge for an instance it does not know. A fleet's reconciliation
// shows only that fleet's instances.
func TestReconcileWithTheSimulator(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 11)
	ctx := context.Background()
	clean := e.rent(0, "f1", nil)
	stopped := e.rent(1, "f1", nil)
	behind := e.rent(2, "f1", nil)
	bid := max(e.offers[3].MinBid*1.2, 0.05)
	rebid := e.rent(3, "f2", &bid)
	// Rented outside vastfleet: no label of ours.
	stranger, err := e.client.CreateInstance(ctx, e.offers[4].ID, provider.CreateRequest{Image: "ubuntu:22.04", Disk: 20})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	if err := e.m.Stop(ctx, []int64{stopped}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(90 * time.Minute) // past midnight: charges of two days
	if err := e.m.Start(ctx, []int64{stopped}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.WaitRunning(ctx, stopped, fleet.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	// Behind vastfleet's back: a destroy, and a bid raised.
	if err := e.client.DestroyInstance(ctx, behind); err != nil {
		t.Fatal(err)
	}
	newBid := bid * 3
	if err := e.client.ChangeBid(ctx, rebid, &newBid); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Hour)
	e.reconcile()
	if err := e.m.Destroy(ctx, []int64{clean}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(30 * time.Minute)
	e.reconcile()

	rep, err := Reconcile(ctx, e.m, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range rep.Instances {
		for _, l := range in.Lines {
			t.Logf("%d %-9s ledger $%.4f charged $%.4f diff %+.4f %s %s", in.ID, l.Kind, l.Ledger, l.Charged, l.Difference, l.Explanation, l.Detail)
		}
	}
	t.Logf("total: ledger $%.4f charged $%.4f difference %+.4f; %d disagree", rep.Total.Ledger, rep.Total.Charged, rep.Total.Difference, rep.Disagree)
	for _, id := range []int64{clean, stopped} {
		in := find(rep, id)
		if !in.Known || !in.Agrees || in.Charged < 0.01 {
			t.Errorf("instance %d: %+v, want agreement within a cent on a real charge", id, in)
		}
	}
	if in := find(rep, behind); in.Agrees || explanations(in)[provider.ChargeCompute] != Stretch || in.Difference >= 0 {
		t.Errorf("destroyed behind vastfleet's back: %+v, want a stretch it was not charged for", in)
	}
	if in := find(rep, rebid); in.Agrees || explanations(in)[provider.ChargeCompute] != RateChange || in.Difference <= 0 {
		t.Errorf("bid raised behind vastfleet's back: %+v, want a rate change charged above the ledger", in)
	}
	if in := find(rep, stranger.NewContract); in.Known || in.Ledger != 0 || in.Charged <= 0 || explanations(in)[provider.ChargeCompute] != UnknownInstance {
		t.Errorf("instance rented outside vastfleet: %+v", in)
	}
	sum := 0.0
	for _, le := range e.mkt.Ledger() {
		sum += le.Amount
	}
	if math.Abs(rep.Total.Charged-sum) > 1e-6 || rep.Disagree != 3 {
		t.Errorf("charged $%.6f, the simulator's ledger $%.6f; %d disagree, want 3", rep.Total.Charged, sum, rep.Disagree)
	}

	f2, err := Reconcile(ctx, e.m, "f2")
	if err != nil {
		t.Fatal(err)
	}
	if len(f2.Instances) != 1 || f2.Instances[0].ID != rebid || f2.Total != (Total{find(rep, rebid).Ledger, find(rep, rebid).Charged, find(rep, rebid).Difference}) {
		t.Errorf("fleet f2: %+v", f2)
	}
}

// TestReconcileNeverReadsABadBillAsZero: a charges answer that does not
// parse, one short of its total, and one for another account each fail
// the reconciliation with their own error and no figures.
func TestReconcileNeverReadsABadBillAsZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 12)
	e.rent(0, "f1", nil)
	e.clock.Advance(time.Hour)
	charge := func(user int) string {
		return `{"type":"instance","source":"instance-1","amount":1,"start":1772402400,"end":1772406000,"items":[{"type":"gpu","amount":1,"items":[],"metadata":{}}],"metadata":{"instance_id":1,"day":1772323200,"user_id":` + strconv.Itoa(user) + `}}`
	}
	for _, tc := range []struct {
		name, body string
		want       error
	}{
		{"unparsable", `{"results":[{"type":"instance",`, provider.ErrChargesUnreadable},
		{"partial", `{"results":[` + charge(4242) + `],"count":1,"total":7,"next_token":null}`, provider.ErrChargesPartial},
		{"another account", `{"results":[` + charge(5) + `],"count":1,"total":1,"next_token":null}`, provider.ErrChargesOtherAccount},
	} {
		e.charges.Store(&tc.body)
		rep, err := Reconcile(context.Background(), e.m, "")
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "not a bill of $0") || rep.Instances != nil {
			t.Errorf("%s: %+v, %v; want %v", tc.name, rep, err, tc.want)
		}
	}
	e.charges.Store(nil)
	if rep, err := Reconcile(context.Background(), e.m, ""); err != nil || len(rep.Instances) != 1 || !rep.Instances[0].Agrees {
		t.Errorf("the simulator's own answer: %+v, %v", rep, err)
	}
}

// TestCompareExplains: each kind of difference gets its name.
func TestCompareExplains(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	span := fleet.Span{From: t0, To: t0.Add(2 * time.Hour)}
	led := fleet.InstanceCost{InstanceID: 5, Fleet: "f", Running: 2 * time.Hour, Existed: 2 * time.Hour, Compute: 1, Storage: 0.1, Bandwidth: 0.02,
		ComputeSpan: span, StorageSpan: span}
	line := func(kind string, amt float64, from, to time.Time) provider.ChargeLine {
		return provider.ChargeLine{Kind: kind, Amount: amt, Start: from, End: to}
	}
	for _, tc := range []struct {
		name  string
		lines []provider.ChargeLine
		bwEst bool
		want  map[string]string
	}{
		{"rounding", []provider.ChargeLine{line("compute", 1.004, t0, span.To), line("storage", 0.1, t0, span.To), line("bandwidth", 0.02, t0, t0)},
			false, map[string]string{"compute": Rounding, "storage": Rounding, "bandwidth": Rounding}},
		{"stretch", []provider.ChargeLine{line("compute", 1.5, t0.Add(-time.Hour), span.To), line("storage", 0.1, t0, span.To), line("bandwidth", 0.02, t0, t0)},
			false, map[string]string{"compute": Stretch, "storage": Rounding}},
		{"rate", []provider.ChargeLine{line("compute", 1.5, t0, span.To), line("storage", 0.1, t0, span.To), line("bandwidth", 0.02, t0, t0)},
			false, map[string]string{"compute": RateChange}},
		{"bandwidth", []provider.ChargeLine{line("compute", 1, t0, span.To), line("storage", 0.1, t0, span.To), line("bandwidth", 0.2, t0, t0)},
			true, map[string]string{"bandwidth": BandwidthEstimate}},
		{"not charged", nil, false, map[string]string{"compute": NotCharged, "storage": NotCharged}},
		{"odd kind", []provider.ChargeLine{line("compute", 1, t0, span.To), line("storage", 0.1, t0, span.To), line("bandwidth", 0.02, t0, t0), line("ip", 0.3, t0, t0)},
			false, map[string]string{"ip": UnknownKind}},
	} {
		l := led
		l.BandwidthEstimated = tc.bwEst
		var charges []provider.Charge
		if tc.lines != nil {
			charges = []provider.Charge{{InstanceID: 5, Day: t0.Truncate(24 * time.Hour), Lines: tc.lines}}
		}
		rep := Compare([]fleet.InstanceCost{l}, charges, map[int64]bool{5: true})
		got := explanations(rep.Instances[0])
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s explained %q, want %q (%+v)", tc.name, k, got[k], v, rep.Instances[0].Lines)
			}
		}
	}
}
