package bill

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// TestBidWatchReconcilesOutbidsToTheCent: a small fleet of interruptible
// instances on a market where rivals bid on every other offer in each
// half hour, left for three hours between two commands, during which
// rivals stop instances and the instances resume, then destroyed. With
// nothing listing meanwhile, the ledger can date those changes only
// mid-way through the three hours, and instances disagree with the bill
// by more than a cent; with a bid watcher listing every
// fleet.BidWatchEvery, every instance agrees within a cent and the total
// to the cent.
func TestBidWatchReconcilesOutbidsToTheCent(t *testing.T) {
	t.Parallel()
	const gap = 3 * time.Hour
	run := func(t *testing.T, watch bool) (Report, int, int) {
		e := newEnvWith(t, 1, sim.Faults{RivalShare: 0.5})
		ctx := context.Background()
		var ids []int64
		for i := 0; len(ids) < 4 && i < len(e.offers); i++ {
			// Above the floor; an offer whose listed minimum (a rival
			// bids in this window) is higher refuses it and is skipped.
			bid := math.Max(e.offers[i].MinBid*1.3, 0.05)
			rec, err := e.m.Rent(ctx, fleet.RentRequest{Fleet: "bids", Offer: e.offers[i],
				Create: provider.CreateRequest{Image: "ubuntu:22.04", Disk: 20, Runtype: "ssh", Price: &bid}})
			if err != nil && strings.Contains(err.Error(), "minimum bid") {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.WaitRunning(ctx, rec.ID, fleet.WaitOptions{}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, rec.ID)
		}
		if _, err := e.m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
			t.Fatal(err)
		}
		if watch {
			// The watch ends by its bound: the instances are kept.
			// Listings on the watch's own grid, whatever the market does.
			w := fleet.BidWatch{Clock: clock.Stepped{M: e.clock}, For: gap,
				Writer: func(context.Context) (*fleet.Manager, func(), error) { return e.m, func() {}, nil },
				Failed: func(err error) { t.Errorf("bid pass: %v", err) }}
			if err := fleet.WatchBids(ctx, w); err != nil {
				t.Fatal(err)
			}
		} else {
			e.clock.Advance(gap)
		}
		if _, err := e.m.DestroyAsked(ctx, fleet.DestroyRequest{All: true, Confirm: func(int) bool { return true }}); err != nil {
			t.Fatal(err)
		}
		if watch {
			// Nothing bids any more: the watch ends at its first listing.
			passes := 0
			w := fleet.BidWatch{Clock: clock.Stepped{M: e.clock},
				Writer: func(context.Context) (*fleet.Manager, func(), error) { passes++; return e.m, func() {}, nil }}
			if err := fleet.WatchBids(ctx, w); err != nil || passes != 1 {
				t.Errorf("a watch with nothing to watch: %v after %d listings, want one", err, passes)
			}
		}
		outbids, resumed := 0, 0
		for _, s := range e.mkt.State() {
			outbids += s.Outbids
			if s.Outbids > 1 || s.Outbids == 1 && s.Status != "stopped" {
				resumed++
			}
		}
		rep, err := Reconcile(ctx, e.m, "")
		if err != nil {
			t.Fatal(err)
		}
		return rep, outbids, resumed
	}
	t.Run("unwatched", func(t *testing.T) {
		t.Parallel()
		rep, outbids, resumed := run(t, false)
		if outbids == 0 || resumed == 0 {
			t.Fatalf("%d outbids, %d resumed: the market forced neither", outbids, resumed)
		}
		if rep.Disagree == 0 {
			t.Errorf("outbids and resumes nobody saw, yet every instance agrees: %+v", rep.Total)
		}
		worst := 0.0
		for _, in := range rep.Instances {
			worst = math.Max(worst, math.Abs(in.Difference))
		}
		t.Logf("%d outbids, %d resumed; %d of %d instances off by a cent or more, worst $%.4f; total ledger $%.4f charged $%.4f",
			outbids, resumed, rep.Disagree, len(rep.Instances), worst, rep.Total.Ledger, rep.Total.Charged)
	})
	t.Run("watched", func(t *testing.T) {
		t.Parallel()
		rep, outbids, resumed := run(t, true)
		if outbids == 0 || resumed == 0 {
			t.Fatalf("%d outbids, %d resumed: the market forced neither", outbids, resumed)
		}
		for _, in := range rep.Instances {
			if !in.Agrees || math.Abs(in.Difference) >= Cent {
				t.Errorf("instance %d: ledger $%.4f, charged $%.4f: %+v", in.ID, in.Ledger, in.Charged, in.Lines)
			}
		}
		if d := math.Abs(rep.Total.Difference); d >= Cent {
			t.Errorf("total: ledger $%.4f, charged $%.4f, off by $%.4f", rep.Total.Ledger, rep.Total.Charged, d)
		}
		t.Logf("%d outbids, %d resumed; total ledger $%.4f charged $%.4f", outbids, resumed, rep.Total.Ledger, rep.Total.Charged)
	})
}
