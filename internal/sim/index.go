package sim

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
)

// searchIndex serves offer searches without copying or re-sorting the
// market per request: for each pricing a search can ask for (allocated
// storage, on-demand or bid) it keeps the offers priced once, and for each
// order it has been asked it keeps their permutation. A search then walks
// that permutation and stops as soon as it holds as many matches as it
// returns, so asking for the top 100 of 100,000 touches a few hundred.
type searchIndex struct {
	base  *Offer // m.offers' backing array the views were built from
	n     int
	views map[viewKey]*pricedView
}

// A bid view is priced from the listed min_bid, which moves each auction
// window, so it is kept per window; an on-demand view only lists min_bid,
// and is patched in place when the window turns.
type viewKey struct {
	storage float64
	bid     bool
	window  int64 // the auction window of a bid view's prices, 0 on demand
}

// maxViews bounds the index's memory: each view is a priced copy of the
// market (about 70 MB at 100,000 offers).
const maxViews = 4

type pricedView struct {
	offers []Offer // disk_space >= the allocated storage, priced
	window int64   // the auction window whose min_bid the offers list
	orders map[string][]int32
	// byPrice is the view's indices by dph_total (then index), prices
	// their dph_total in that order: a search bounded in price reads
	// only the offers in its range.
	byPrice []int32
	prices  []float64
}

// view is the market priced for a search at allocated storage, on demand
// or bid, in auction window w; minBid gives an offer's listed min_bid then,
// from the market's own floor (a view's column is already listed).
func (ix *searchIndex) view(all []Offer, storage float64, bid bool, w int64, minBid func(offerID int64) float64) *pricedView {
	var base *Offer
	if len(all) > 0 {
		base = &all[0]
	}
	if ix.views == nil || ix.base != base || ix.n != len(all) {
		ix.base, ix.n, ix.views = base, len(all), map[viewKey]*pricedView{}
	}
	k := viewKey{storage, bid, 0}
	if bid {
		k.window = w
	}
	if v, ok := ix.views[k]; ok {
		if v.window != w {
			v.relist(w, minBid)
		}
		return v
	}
	if len(ix.views) >= maxViews {
		clear(ix.views)
	}
	v := &pricedView{orders: map[string][]int32{}}
	for _, o := range all {
		// The server turns allocated_storage into disk_space >= it.
		if o.DiskSpace < storage {
			continue
		}
		o.MinBid = minBid(o.ID)
		PriceOffer(&o, storage, bid)
		v.offers = append(v.offers, o)
	}
	v.window = w
	v.byPrice = make([]int32, len(v.offers))
	for i := range v.byPrice {
		v.byPrice[i] = int32(i)
	}
	slices.SortStableFunc(v.byPrice, func(a, b int32) int { return cmp.Compare(v.offers[a].DPHTotal, v.offers[b].DPHTotal) })
	v.prices = make([]float64, len(v.offers))
	for i, j := range v.byPrice {
		v.prices[i] = v.offers[j].DPHTotal
	}
	ix.views[k] = v
	return v
}

// relist moves an on-demand view's min_bid column to window w; only the
// orders that read it are dropped.
func (v *pricedView) relist(w int64, minBid func(offerID int64) float64) {
	for i := range v.offers {
		v.offers[i].MinBid = minBid(v.offers[i].ID)
	}
	for name := range v.orders {
		if strings.Contains(name, "min_bid") {
			delete(v.orders, name)
		}
	}
	v.window = w
}

// inPrice returns the view's indices, ascending, of the offers whose
// dph_total lies in [lo, hi]; ok is false when that is most of the view,
// where walking the whole view costs less than gathering it.
func (v *pricedView) inPrice(lo, hi float64) (idx []int32, ok bool) {
	a, _ := slices.BinarySearchFunc(v.prices, lo, func(p, t float64) int {
		if p < t || math.IsNaN(p) {
			return -1
		}
		return 1
	})
	b, _ := slices.BinarySearchFunc(v.prices, hi, func(p, t float64) int {
		if p <= t || math.IsNaN(p) {
			return -1
		}
		return 1
	})
	if b <= a {
		return nil, true
	}
	if b-a > len(v.prices)/2 {
		return nil, false
	}
	idx = slices.Clone(v.byPrice[a:b])
	slices.Sort(idx)
	return idx, true
}

// order is the view's offers sorted (stably) by the request's order keys.
func (v *pricedView) order(keys []orderKey) []int32 {
	name := orderName(keys)
	if p, ok := v.orders[name]; ok {
		return p
	}
	p := make([]int32, len(v.offers))
	for i := range p {
		p[i] = int32(i)
	}
	slices.SortStableFunc(p, func(a, b int32) int { return compareOffers(keys, &v.offers[a], &v.offers[b]) })
	v.orders[name] = p
	return p
}

// searchOffers is the server's search: filter, order, cap. Offers held by
// an instance or taken by another renter show as not rentable.
func (m *Market) searchOffers(q *request, now time.Time, limit int) []Offer {
	storage := q.storage
	if storage <= 0 {
		storage = 5
	}
	v := m.index.view(m.offers, storage, q.bid, bidWindowOf(now), func(id int64) float64 { return m.listedMinBid(&m.offers[m.byID[id]], now) })
	held, used := m.holders(), m.gpusInUse()
	// With no instance live, no offer is held, and one is crowded only
	// if it needs more GPUs than its machine has: no map lookups.
	quiet := len(held) == 0 && len(used) == 0
	var scratch Offer
	shown := func(i int32) *Offer {
		o := &v.offers[i]
		if quiet && o.NumGPUs <= MachineGPUs(o) && !m.churned(o.ID, now) {
			return o
		}
		if _, taken := held[o.ID]; taken || crowded(o, used) || m.churned(o.ID, now) {
			scratch = *o
			scratch.Rentable, scratch.Rented = false, taken
			return &scratch
		}
		return o
	}
	capped := func(out []Offer) []Offer {
		if limit > 0 && len(out) > limit {
			out = out[:limit]
		}
		return out
	}
	if q.sortsByAvailability() {
		// The order reads what holders change per request: no permutation
		// can be kept, so sort this request's matches.
		matched := []Offer{}
		for i := range v.offers {
			if o := shown(int32(i)); q.matches(o) {
				matched = append(matched, *o)
			}
		}
		slices.SortStableFunc(matched, func(a, b Offer) int { return compareOffers(q.order, &a, &b) })
		return capped(matched)
	}
	if lo, hi, ok := q.priceBounds(); ok {
		if in, ok := v.inPrice(lo, hi); ok {
			// A price slice (a sweep's): filter only the offers in it,
			// then order them, ties in view order as the walk below.
			var matched []int32
			for _, i := range in {
				if q.matches(shown(i)) {
					matched = append(matched, i)
				}
			}
			if len(q.order) > 0 {
				// Order does not read availability here: the view's
				// offers compare as shown.
				slices.SortStableFunc(matched, func(a, b int32) int { return compareOffers(q.order, &v.offers[a], &v.offers[b]) })
			}
			if limit > 0 && len(matched) > limit {
				matched = matched[:limit]
			}
			out := make([]Offer, len(matched))
			for n, i := range matched {
				out[n] = *shown(i)
			}
			return out
		}
	}
	var perm []int32
	if len(q.order) > 0 {
		perm = v.order(q.order)
	}
	out := []Offer{}
	for j := range v.offers {
		i := int32(j)
		if perm != nil {
			i = perm[j]
		}
		if o := shown(i); q.matches(o) {
			out = append(out, *o)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out
}
