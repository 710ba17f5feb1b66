package vast

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// TestClientSurvivesTheSimulatorsOddRowsAndCap: the simulator, on its own,
// cuts every answer to 300 offers and sends a fifth of its rows in the
// shapes vast has been seen to send. The client's sweep still finds every
// offer the same market holds uncut, and its listing still holds every
// instance, none of them lost.
func TestClientSurvivesTheSimulatorsOddRowsAndCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	plain := newSimEnv(t, sim.Config{Seed: 11, Offers: 1500}, nil)
	odd := newSimEnv(t, sim.Config{Seed: 11, Offers: 1500, AnswerCap: 300, Faults: sim.Faults{OddRows: 0.2}}, nil)
	q, _, err := market.Parse("rentable=True", market.ParseOptions{NoDefault: true})
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := provider.SweepOffers(ctx, plain.c, q, provider.DefaultSweepPage)
	if err != nil {
		t.Fatal(err)
	}
	got, reqs, err := provider.SweepOffers(ctx, odd.c, q, provider.DefaultSweepPage)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(os []market.Offer) []int64 {
		var out []int64
		for _, o := range os {
			out = append(out, o.ID)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("capped, odd market: %d offers in %d requests; the same market uncut: %d", len(got), reqs, len(want))
	}
	t.Logf("%d offers in %d requests through a 300-offer cap with 20%% odd rows", len(got), reqs)

	// Instances: every one listed, whatever its row's shape.
	var created []int64
	for _, o := range got[:40] {
		c, err := odd.c.CreateInstance(ctx, o.ID, provider.CreateRequest{Image: "ubuntu:22.04", Disk: 10, Label: "odd"})
		if err != nil {
			continue // taken meanwhile
		}
		created = append(created, c.NewContract)
	}
	if len(created) < 30 {
		t.Fatalf("only %d creates", len(created))
	}
	l, err := odd.c.ListInstances(ctx)
	if err != nil {
		t.Fatalf("listing with odd rows: %v", err)
	}
	listed := map[int64]provider.Instance{}
	for _, in := range l.Instances {
		listed[in.ID] = in
	}
	unknown := 0
	for _, id := range created {
		in, ok := listed[id]
		if !ok {
			t.Errorf("instance %d missing from the listing", id)
			continue
		}
		if in.Status() == "unknown" {
			unknown++
		}
	}
	if unknown == len(created) {
		t.Errorf("every row unreadable: %d of %d", unknown, len(created))
	}
	t.Logf("%d instances listed, %d read as unknown; log:\n%s", len(created), unknown, grepLog(odd.logs.String(), "quarantined"))
}

func grepLog(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestBulkStatesAgainstTheSimulator: 70 instances stopped and started in
// bulk, two calls of up to 64 ids each way; an id the marketplace does
// not know comes back failed, the rest change.
func TestBulkStatesAgainstTheSimulator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newSimEnv(t, sim.Config{Seed: 5, Offers: 800}, nil)
	q, _, _ := market.Parse("rentable=True", market.ParseOptions{NoDefault: true, Limit: 200})
	offers, err := e.c.SearchOffers(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, o := range offers {
		if len(ids) == 70 {
			break
		}
		c, err := e.c.CreateInstance(ctx, o.ID, provider.CreateRequest{Image: "ubuntu:22.04", Disk: 10})
		if err == nil {
			ids = append(ids, c.NewContract)
		}
	}
	if len(ids) < 70 {
		t.Fatalf("only %d creates", len(ids))
	}
	e.clock.Advance(time.Hour)
	before := e.hits.Load()
	failed, err := e.c.SetStates(ctx, append(ids, 424242), false)
	if err != nil || len(failed) != 1 || failed[0] != 424242 {
		t.Fatalf("bulk stop: failed %v, err %v; want only the unknown id", failed, err)
	}
	if calls := e.hits.Load() - before; calls != 2 {
		t.Errorf("bulk stop of 71 ids took %d calls, want 2", calls)
	}
	l, err := e.c.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range l.Instances {
		if in.Status() != provider.StateStopped {
			t.Fatalf("instance %d after bulk stop: %s", in.ID, in.Status())
		}
	}
	if failed, err := e.c.SetStates(ctx, ids, true); err != nil || len(failed) != 0 {
		t.Fatalf("bulk start: failed %v, err %v", failed, err)
	}
}
