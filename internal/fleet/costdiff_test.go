package fleet

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// TestCostMatchesLedgerOnGeneratedTimelines: the client's cost (the
// store's observed transitions priced by provider's billing rules) and the
// simulator's ledger (its own rules, internal/sim/billing.go) are two
// implementations of vast's billing; on generated timelines of run, stop,
// start, bid changes and destroy, over on-demand and interruptible
// rentals, they agree per instance and per kind.
func TestCostMatchesLedgerOnGeneratedTimelines(t *testing.T) {
	t.Parallel()
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	if testing.Short() {
		seeds = seeds[:2]
	}
	seen := map[string]int{}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			for _, step := range costTimeline(t, seed) {
				verb, _, _ := strings.Cut(step, " ")
				seen[verb]++
			}
		})
	}
	// The generator must reach every kind of step, or it tests less than
	// it says.
	for _, verb := range []string{"rent", "advance", "stop", "start", "bid", "destroy"} {
		if seen[verb] == 0 {
			t.Errorf("no %s step in any timeline: %v", verb, seen)
		}
	}
	t.Logf("steps: %v", seen)
}

// costTimeline runs one generated timeline and compares; it returns the
// steps taken.
func costTimeline(t *testing.T, seed uint64) []string {
	// Rivals almost never bid: an outbid is a transition only a poll
	// sees, and the test is of the billing rules, not of poll dating.
	e := newEnv(t, envOpts{seed: int64(seed) + 20, faults: sim.Faults{RivalShare: 1e-9}})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 25))

	type live struct {
		id      int64
		bid     *float64
		minBid  float64
		maxRate float64 // the highest compute $/h it had
		stopped bool
		gone    bool
		starts  int // starts the client dated from a poll
	}
	var ids []int64
	insts := map[int64]*live{}
	var script []string
	for i := range 3 + r.IntN(3) {
		req := e.rentReq(i)
		l := &live{starts: 1, minBid: req.Offer.MinBid, maxRate: req.Offer.DPHBase}
		if r.IntN(2) == 0 {
			b := max(req.Offer.MinBid*(1.1+r.Float64()), 0.02)
			req.Create.Price, l.bid, l.maxRate = &b, &b, b
		}
		if r.IntN(2) == 0 {
			req.Create.Disk = 20 + float64(r.IntN(200))
		}
		rec := e.rentRunning(req)
		l.id = rec.ID
		ids = append(ids, rec.ID)
		insts[rec.ID] = l
		script = append(script, fmt.Sprintf("rent %d bid=%v disk=%v", rec.ID, req.Create.Price != nil, req.Create.Disk))
		e.clock.Advance(time.Duration(r.IntN(40)) * time.Minute)
	}
	for range 12 + r.IntN(10) {
		id := ids[r.IntN(len(ids))]
		l := insts[id]
		if l.gone {
			continue
		}
		switch k := r.IntN(10); {
		case k < 4:
			d := time.Duration(1+r.IntN(120)) * time.Minute
			e.clock.Advance(d)
			script = append(script, "advance "+d.String())
		case k < 6 && !l.stopped:
			if err := e.m.Stop(ctx, []int64{id}); err != nil {
				t.Fatal(err)
			}
			l.stopped = true
			script = append(script, fmt.Sprintf("stop %d", id))
		case k < 8 && l.stopped:
			if err := e.m.Start(ctx, []int64{id}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.WaitRunning(ctx, id, WaitOptions{}); err != nil {
				t.Fatalf("start %d: %v (%s)", id, err, strings.Join(script, "; "))
			}
			l.stopped = false
			l.starts++
			script = append(script, fmt.Sprintf("start %d", id))
		case k == 8 && l.bid != nil && !l.stopped:
			// The official CLI's change bid: the client learns of it from
			// the next listing, taken at once.
			p := max(*l.bid*(0.8+0.8*r.Float64()), l.minBid*1.01)
			if err := e.m.P.(provider.Bidder).ChangeBid(ctx, id, &p); err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.Reconcile(ctx, ReconcileOptions{}); err != nil {
				t.Fatal(err)
			}
			l.bid, l.maxRate = &p, max(l.maxRate, p)
			script = append(script, fmt.Sprintf("bid %d %.4f", id, p))
		case k == 9:
			if err := e.m.Destroy(ctx, []int64{id}); err != nil {
				t.Fatal(err)
			}
			l.gone = true
			script = append(script, fmt.Sprintf("destroy %d", id))
		}
	}
	e.clock.Advance(time.Duration(r.IntN(90)) * time.Minute)
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
	if len(rep.Instances) != len(ids) {
		t.Fatalf("%d instances in the report, %d rented", len(rep.Instances), len(ids))
	}
	worst := 0.0
	for _, c := range rep.Instances {
		l := ledger[c.InstanceID]
		// A start seen by a poll is dated mid-way since the poll before:
		// half a poll of compute per start at most.
		in := insts[c.InstanceID]
		halfPoll := DefaultPollEvery.Hours() / 2
		tol := float64(in.starts)*in.maxRate*halfPoll + 1e-9
		d := math.Abs(c.Compute - l["compute"])
		worst = max(worst, d)
		if d > tol || math.Abs(c.Storage-l["storage"]) > 1e-6 || math.Abs(c.Bandwidth-l["bandwidth"]) > 1e-9 {
			t.Errorf("instance %d: cost compute %.6f storage %.6f bandwidth %.6f; ledger %.6f %.6f %.6f\nscript: %s",
				c.InstanceID, c.Compute, c.Storage, c.Bandwidth, l["compute"], l["storage"], l["bandwidth"], strings.Join(script, "; "))
		}
	}
	t.Logf("%d instances, %d steps; worst compute gap $%.5f", len(ids), len(script), worst)
	return script
}
