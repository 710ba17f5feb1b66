package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vastfleet/vastfleet/internal/market"
)

// referenceSearch is the search as a plain copy-filter-sort of the whole
// market: what the index must answer, offer for offer.
func referenceSearch(m *Market, q *request, limit int) []Offer {
	storage := q.storage
	if storage <= 0 {
		storage = 5
	}
	now := m.cfg.Clock.Now()
	held, used := m.holders(), m.gpusInUse()
	view := []Offer{}
	for _, o := range m.offers {
		if o.DiskSpace < storage {
			continue
		}
		if _, taken := held[o.ID]; taken || crowded(&o, used) || m.churned(o.ID, now) {
			o.Rentable, o.Rented = false, taken
		}
		o.MinBid = m.listedMinBid(&o, now)
		PriceOffer(&o, storage, q.bid)
		if q.matches(&o) {
			view = append(view, o)
		}
	}
	sort.SliceStable(view, func(i, j int) bool { return compareOffers(q.order, &view[i], &view[j]) < 0 })
	if limit > 0 && len(view) > limit {
		view = view[:limit]
	}
	return view
}

// clientRequest is the body the client's parser posts for a query in
// the CLI's syntax, as the server reads it.
func clientRequest(t *testing.T, query string, opts market.ParseOptions) *request {
	t.Helper()
	q, _, err := market.Parse(query, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseRequest(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return r
}

func TestIndexedSearchMatchesAPlainSort(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: statistics over many rentals, not concurrency; the plain run covers it")
	}
	faults, _ := Profile("none")
	faults.OfferChurnPerHour = 0.3
	h := newHarness(t, Config{Seed: 4, Offers: 3000, Faults: faults})
	// Hold a few offers so they show as rented.
	for _, o := range h.search(`{"rentable":{"eq":true},"limit":5,"order":[["dph_total","asc"]]}`) {
		h.create(o.ID, "held")
	}
	queries := []struct {
		q     string
		order string
		limit int
	}{
		{"rentable=True", "score-", 64},
		{"", "+dph_total,+id", 1000},
		{"gpu_ram>=24 reliability>0.95 geolocation notin [CN,HK]", "-dlperf", 100},
		{"cpu_cores_effective>16 dph_total<=5", "", 50},
		{"num_gpus>=2", "rentable-,+dph_total", 30},
		{"", "+inet_down", 7},
		{"min_bid<=0.3", "-min_bid", 40},
		// Price slices, as a sweep asks: served from the price index.
		{"dph_total>=0.2 dph_total<0.4", "score-", 1000},
		{"dph_total>=0.2 dph_total<0.4", "score-", 10},
		{"dph_total>0.1 dph_total<=0.3 rentable=True", "+dph_total", 40},
		{"dph_total>=0.3 dph_total<0.5 id>=0 id<2000000000", "-cpu_cores_effective", 100},
		{"dph_total<=0.6", "", 50},
		{"dph_total>=0.25 dph_total<=0.6 verified=True", "-dlperf", 1000},
	}
	// The second round is in the next auction window: listed min_bids
	// moved, and the cached views must follow them.
	for round := range 2 {
		if round > 0 {
			h.clock.Advance(bidWindow)
		}
		for _, tc := range queries {
			for _, typ := range []string{"on-demand", "bid"} {
				for _, storage := range []float64{5, 200} {
					q := clientRequest(t, tc.q, market.ParseOptions{NoDefault: true, Type: typ, Order: tc.order, Storage: storage})
					h.m.mu.Lock()
					want := referenceSearch(h.m, q, tc.limit)
					got := h.m.searchOffers(q, h.m.cfg.Clock.Now(), tc.limit)
					h.m.mu.Unlock()
					if len(want) == 0 {
						t.Fatalf("%q: the reference found nothing; the case tests nothing", tc.q)
					}
					if d := cmp.Diff(want, got); d != "" {
						t.Errorf("round %d: %q order %q %s storage %v: indexed search differs (-plain +indexed):\n%s", round, tc.q, tc.order, typ, storage, d)
					}
				}
			}
		}
	}
}

// TestPriceIndexRange: a price range reads exactly the view's offers in
// it (NaN prices never), and the sweep-like slices of the test above take
// that path rather than the full walk.
func TestPriceIndexRange(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 4, Offers: 3000})
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	// Some prices NaN: they sort first and must fall in no range.
	for i := 0; i < len(h.m.offers); i += 97 {
		h.m.offers[i].DPHBase = math.NaN()
	}
	h.m.index = searchIndex{}
	v := h.m.index.view(h.m.offers, 5, false, 0, func(int64) float64 { return 0 })
	if !math.IsNaN(v.prices[0]) {
		t.Fatal("no NaN price in the view")
	}
	for _, r := range [][2]float64{{0.2, 0.4}, {0.1, 0.3}, {0.25, 0.6}, {0.3, 0.3}, {5, 1}} {
		q := clientRequest(t, fmt.Sprintf("dph_total>=%g dph_total<=%g", r[0], r[1]), market.ParseOptions{NoDefault: true})
		lo, hi, ok := q.priceBounds()
		if !ok || lo != r[0] || hi != r[1] {
			t.Fatalf("%v: priceRange %v %v %v", r, lo, hi, ok)
		}
		got, ok := v.inPrice(lo, hi)
		if !ok {
			t.Fatalf("%v: the range fell back to the full walk", r)
		}
		var want []int32
		for i := range v.offers {
			if p := v.offers[i].DPHTotal; p >= lo && p <= hi {
				want = append(want, int32(i))
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%v: index gives %d offers, a scan %d", r, len(got), len(want))
		}
	}
	if _, ok := v.inPrice(math.Inf(-1), math.Inf(1)); ok {
		t.Fatal("an unbounded range should walk the whole view")
	}
}

// TestFilterRowMatchesRow: the listing filters on filterRow, so every
// column a filter may name must read as the full row has it, whatever
// state the instance is in.
func TestFilterRowMatchesRow(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 6})
	offers := h.search(`{"rentable":{"eq":true},"order":[["dph_total","asc"]],"type":"on-demand","allocated_storage":20,"limit":12}`)
	var ids []int64
	for i, o := range offers {
		ids = append(ids, h.create(o.ID, fmt.Sprintf("f-%d", i%3)))
	}
	h.setState(ids[0], "stopped")
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	now := h.m.cfg.Clock.Now()
	n := 0
	for _, in := range h.m.st.Instances {
		if in.Destroyed {
			continue
		}
		full, light := h.m.row(in, now), h.m.filterRow(in)
		for field := range listFields {
			for _, v := range []any{full.IntendedStatus, full.GPUName, full.Verification, float64(full.ID), "running", "stopped", nil} {
				f := []listFilter{{field: field, op: "eq", vals: []any{v}}}
				if matchAll(&full, f) != matchAll(&light, f) {
					t.Fatalf("instance %d, %s eq %v: the full row and the filter row disagree", in.ID, field, v)
				}
			}
		}
		if full.Label != nil {
			f := []listFilter{{field: "label", op: "eq", vals: []any{*full.Label}}}
			if !matchAll(&light, f) {
				t.Fatalf("instance %d: label %q not matched", in.ID, *full.Label)
			}
		}
		n++
	}
	if n != len(ids) {
		t.Fatalf("%d instances checked, %d rented", n, len(ids))
	}
}

// TestIndexedSearchQuietMarket: with no instance live the search skips
// the held and crowded lookups; it must still answer as the plain sort,
// churn included.
func TestIndexedSearchQuietMarket(t *testing.T) {
	t.Parallel()
	faults, _ := Profile("none")
	faults.OfferChurnPerHour = 0.3
	h := newHarness(t, Config{Seed: 9, Offers: 3000, Faults: faults})
	for _, tc := range []struct{ q, order string }{
		{"rentable=True", "score-"},
		{"dph_total>=0.2 dph_total<0.5 rentable=True", "score-"},
		{"dph_total<=0.4 rented=False", "+dph_total"},
	} {
		q := clientRequest(t, tc.q, market.ParseOptions{NoDefault: true, Order: tc.order})
		h.m.mu.Lock()
		want := referenceSearch(h.m, q, 1000)
		got := h.m.searchOffers(q, h.m.cfg.Clock.Now(), 1000)
		h.m.mu.Unlock()
		if len(want) == 0 {
			t.Fatalf("%q: nothing found; the case tests nothing", tc.q)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%q: indexed search differs (-plain +indexed):\n%s", tc.q, d)
		}
	}
}
