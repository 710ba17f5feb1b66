package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
)

// capped is a Provider whose search filters dph_total, id and num_gpus
// numerically and, like the marketplace, returns at most limit offers in
// an order unrelated to price.
type capped struct {
	Provider
	offers []market.Offer
	max    int
	calls  atomic.Int64 // a Provider is used concurrently
	// unordered ignores an ascending price order (as a marketplace that
	// honours no order would); otherwise it is kept, ties by id descending.
	unordered bool
	sent      atomic.Int64 // offers returned over all calls
}

func (c *capped) SearchOffers(_ context.Context, q market.Query) ([]market.Offer, error) {
	c.calls.Add(1)
	var out []market.Offer
	for _, o := range c.offers {
		if match(q, "dph_total", o.DPHTotal) && match(q, "id", float64(o.ID)) && match(q, "num_gpus", float64(o.NumGPUs)) {
			out = append(out, o)
		}
	}
	if len(q.Order) == 1 && q.Order[0][0] == "id" {
		slices.SortFunc(out, func(a, b market.Offer) int { return int(a.ID - b.ID) })
		if q.Order[0][1] == "desc" {
			slices.Reverse(out)
		}
	} else if len(q.Order) == 1 && q.Order[0] == [2]string{"dph_total", "asc"} && !c.unordered {
		slices.SortFunc(out, func(a, b market.Offer) int {
			if c := cmp.Compare(a.DPHTotal, b.DPHTotal); c != 0 {
				return c
			}
			return int(b.ID - a.ID)
		})
	} else if len(q.Order) == 1 && q.Order[0] == [2]string{"dph_total", "desc"} {
		slices.SortFunc(out, func(a, b market.Offer) int {
			switch {
			case a.DPHTotal > b.DPHTotal:
				return -1
			case a.DPHTotal < b.DPHTotal:
				return 1
			}
			return 0
		})
	} else {
		// A stand-in for "score": by id descending.
		slices.SortFunc(out, func(a, b market.Offer) int { return int(b.ID - a.ID) })
	}
	lim := c.max
	if q.Limit > 0 && q.Limit < lim {
		lim = q.Limit
	}
	if len(out) > lim {
		out = out[:lim]
	}
	c.sent.Add(int64(len(out)))
	return out, nil
}

func match(q market.Query, field string, v float64) bool {
	for op, raw := range q.Filters[field] {
		x, ok := num(raw)
		if !ok {
			panic(fmt.Sprintf("filter %s %s: %v", field, op, raw))
		}
		var good bool
		switch op {
		case "eq":
			good = v == x
		case "gte":
			good = v >= x
		case "gt":
			good = v > x
		case "lte":
			good = v <= x
		case "lt":
			good = v < x
		default:
			panic(op)
		}
		if !good {
			return false
		}
	}
	return true
}

func market1(n int, seed uint64) []market.Offer {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]market.Offer, n)
	for i := range out {
		out[i] = market.Offer{ID: int64(1000 + i*7), NumGPUs: 1 + r.IntN(4), DPHTotal: float64(r.IntN(5000)) / 1000}
	}
	// A cluster at one price, wider than a search: only id splits reach it.
	for i := 0; i < min(30, n); i++ {
		out[i].DPHTotal = 0.25
	}
	return out
}

func TestSweepOffers(t *testing.T) {
	all := market1(600, 1)
	tests := []struct {
		name    string
		filters map[string]map[string]any
	}{
		{"everything", map[string]map[string]any{}},
		{"user bounds as strings", map[string]map[string]any{"dph_total": {"gte": "0.2", "lt": "3"}, "num_gpus": {"gte": "2"}}},
		{"user upper bound inclusive", map[string]map[string]any{"dph_total": {"lte": 1.5}}},
		{"single price", map[string]map[string]any{"dph_total": {"eq": "0.25"}}},
	}
	for _, tt := range tests {
		for _, unordered := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s unordered=%v", tt.name, unordered), func(t *testing.T) {
				p := &capped{offers: all, max: 20, unordered: unordered}
				q := market.Query{Filters: tt.filters, Order: [][2]string{{"score", "desc"}}, Type: "on-demand", AllocatedStorage: 5}
				got, reqs, err := SweepOffers(context.Background(), p, q, 20)
				if err != nil {
					t.Fatal(err)
				}
				var want []int64
				for _, o := range all {
					if match(q, "dph_total", o.DPHTotal) && match(q, "num_gpus", float64(o.NumGPUs)) {
						want = append(want, o.ID)
					}
				}
				var ids []int64
				for _, o := range got {
					ids = append(ids, o.ID)
				}
				slices.Sort(ids)
				slices.Sort(want)
				if !slices.Equal(ids, want) {
					t.Fatalf("got %d offers, want %d", len(ids), len(want))
				}
				if int64(reqs) != p.calls.Load() {
					t.Errorf("requests = %d, provider saw %d", reqs, p.calls.Load())
				}
				if !slices.IsSortedFunc(got, func(a, b market.Offer) int {
					if a.DPHTotal != b.DPHTotal {
						return map[bool]int{true: -1, false: 1}[a.DPHTotal < b.DPHTotal]
					}
					return int(a.ID - b.ID)
				}) {
					t.Error("result not sorted by dph_total, id")
				}
				// The caller's query is not modified.
				if _, ok := q.Filters["id"]; ok {
					t.Error("sweep wrote into the caller's filters")
				}
				t.Logf("%d offers in %d requests", len(got), reqs)
			})
		}
	}
}

// TestSweepCheapestFirstAsksLess: when the marketplace keeps the asked
// price order, full answers move the sweep on instead of being asked
// again in halves: the same offers come back in fewer requests, with few
// offers sent twice. Without the order the sweep still finds them all.
func TestSweepCheapestFirstAsksLess(t *testing.T) {
	all := market1(20_000, 5)
	var reqs [2]int
	var sent [2]int64
	for i, unordered := range []bool{false, true} {
		p := &capped{offers: all, max: 500, unordered: unordered}
		got, n, err := SweepOffers(context.Background(), p, market.Query{}, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(all) {
			t.Fatalf("unordered=%v: %d offers, want %d", unordered, len(got), len(all))
		}
		reqs[i], sent[i] = n, p.sent.Load()
	}
	t.Logf("cheapest first: %d requests, %d offers sent; unordered: %d requests, %d sent", reqs[0], sent[0], reqs[1], sent[1])
	if reqs[0] >= reqs[1] || sent[0] >= sent[1] {
		t.Errorf("cheapest first asked %d times for %d offers, unordered %d for %d", reqs[0], sent[0], reqs[1], sent[1])
	}
	// At most a tenth sent twice (ties at a page's dearest price).
	if sent[0] > int64(len(all))*11/10 {
		t.Errorf("cheapest first sent %d offers for %d", sent[0], len(all))
	}
}

func TestSweepOneRequestWhenNotFull(t *testing.T) {
	p := &capped{offers: market1(10, 2), max: 64}
	got, reqs, err := SweepOffers(context.Background(), p, market.Query{}, 64)
	if err != nil || len(got) != 10 || reqs != 1 {
		t.Fatalf("got %d offers, %d requests, err %v", len(got), reqs, err)
	}
}

func TestSweepDuplicateIDsReportIncomplete(t *testing.T) {
	// A marketplace that repeats one id can never be proven complete.
	offers := make([]market.Offer, 5)
	for i := range offers {
		offers[i] = market.Offer{ID: 42, DPHTotal: 0.1}
	}
	p := &capped{offers: offers, max: 3}
	_, _, err := SweepOffers(context.Background(), p, market.Query{}, 3)
	if !errors.Is(err, ErrSweepIncomplete) {
		t.Fatalf("err = %v, want ErrSweepIncomplete", err)
	}
}

type failing struct{ Provider }

func (failing) SearchOffers(context.Context, market.Query) ([]market.Offer, error) {
	return nil, ErrServer
}

func TestSweepPropagatesErrors(t *testing.T) {
	if _, _, err := SweepOffers(context.Background(), failing{}, market.Query{}, 5); !errors.Is(err, ErrServer) {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := SweepOffers(context.Background(), failing{}, market.Query{}, 0); err == nil {
		t.Fatal("cap 0 accepted")
	}
}

// TestSweepKeepsEveryOfferWhole: over a market larger than one chunk of
// the sweep's store, every offer comes back once, field for field, in
// (dph_total, id) order.
func TestSweepKeepsEveryOfferWhole(t *testing.T) {
	all := market1(3*sweepChunk+123, 3)
	for i := range all {
		all[i].CPUCoresEffective = float64(i % 97)
		all[i].Geolocation = fmt.Sprint("Place, ", i%13)
	}
	p := &capped{offers: all, max: 500}
	got, _, err := SweepOffers(context.Background(), p, market.Query{}, 500)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(all)
	slices.SortFunc(want, func(a, b market.Offer) int {
		if c := cmp.Compare(a.DPHTotal, b.DPHTotal); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if len(got) != len(want) {
		t.Fatalf("%d offers, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("offer %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
