package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vastfleet/vastfleet/internal/market"
)

// referenceSearch is the search as a plain copy-filter-sort of the whole
// market: what the index must answer, offer for offer.
func referenceSearch(m *Market, q market.Query, limit int) []market.Offer {
	storage := q.AllocatedStorage
	if storage <= 0 {
		storage = 5
	}
	now := m.cfg.Clock.Now()
	held, used := m.holders(), m.gpusInUse()
	var view []market.Offer
	for _, o := range m.offers {
		if o.DiskSpace < storage {
			continue
		}
		if _, taken := held[o.ID]; taken || crowded(&o, used) || m.churned(o.ID, now) {
			o.Rentable, o.Rented = false, taken
		}
		PriceOffer(&o, storage, q.Type == "bid")
		view = append(view, o)
	}
	out, err := market.Select(view, q, limit)
	if err != nil {
		panic(err)
	}
	return out
}

func TestIndexedSearchMatchesAPlainSort(t *testing.T) {
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
	}
	for _, tc := range queries {
		for _, typ := range []string{"on-demand", "bid"} {
			for _, storage := range []float64{5, 200} {
				q, _, err := market.Parse(tc.q, market.ParseOptions{NoDefault: true, Type: typ, Order: tc.order, Storage: storage})
				if err != nil {
					t.Fatal(err)
				}
				h.m.mu.Lock()
				want := referenceSearch(h.m, q, tc.limit)
				got, err := h.m.searchOffers(q, h.m.cfg.Clock.Now(), tc.limit)
				h.m.mu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
				if len(want) == 0 {
					t.Fatalf("%q: the reference found nothing; the case tests nothing", tc.q)
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("%q order %q %s storage %v: indexed search differs (-plain +indexed):\n%s", tc.q, tc.order, typ, storage, d)
				}
			}
		}
	}
}
