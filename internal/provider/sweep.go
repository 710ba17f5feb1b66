package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/vastfleet/vastfleet/internal/market"
)

// ErrSweepIncomplete: a sweep could not prove it saw every matching offer
// (a slice stayed full even when it could not be split further, or the
// request budget ran out). The offers returned are still real.
var ErrSweepIncomplete = errors.New("offer sweep incomplete")

// MinPriceSlice is the narrowest dph_total slice a sweep splits; narrower
// full slices are split by offer id instead.
const MinPriceSlice = 0.0001

// maxSweepRequests bounds one sweep against a misbehaving marketplace.
const maxSweepRequests = 5000

// DefaultSweepPage is how many offers one search of a sweep asks for
// (search --sweep-limit, and a launch's candidates).
const DefaultSweepPage = 1000

// idCeiling is the upper end of the id range split (ids stay JSON-safe).
const idCeiling = int64(1) << 53

// SweepOffers collects every offer matching q even though one search
// returns at most cap offers (or fewer, when the marketplace caps its
// answers lower: see full): slices are asked cheapest first, so a full
// answer (cap offers) covers its slice up to its dearest price, and the
// rest of the slice is split into two dph_total ranges, recursively,
// within the user's own dph_total bounds (when the marketplace does not
// keep that order, the whole slice is split); a full slice narrower than
// MinPriceSlice is split by offer id. Each slice query asks for cap offers
// (q.Limit and q.Order are replaced). The result is
// de-duplicated by id and sorted by dph_total then id; requests counts the
// searches made. On ErrSweepIncomplete the offers found so far come back.
func SweepOffers(ctx context.Context, p Provider, q market.Query, cap int) (offers []market.Offer, requests int, err error) {
	if cap <= 0 {
		return nil, 0, fmt.Errorf("sweep: cap must be positive, got %d", cap)
	}
	s := &sweeper{p: p, base: q, cap: cap, seen: map[int64]int32{}, inflight: make(chan struct{}, sweepParallel)}
	err = s.run(ctx)
	// Sort positions, then copy each ~700-byte offer once.
	pos := make([]int32, len(s.seen))
	for i := range pos {
		pos[i] = int32(i)
	}
	clear(s.seen)
	slices.SortFunc(pos, func(i, j int32) int {
		a, b := s.at(i), s.at(j)
		if c := cmp.Compare(a.DPHTotal, b.DPHTotal); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	offers = make([]market.Offer, len(pos))
	for i, p := range pos {
		offers[i] = *s.at(p)
	}
	s.chunks = nil
	return offers, s.requests, err
}

// sweepParallel is how many slice searches a sweep keeps in flight: the
// halves of a split are independent, and a sweep of a whole market is
// otherwise a hundred round trips end to end. The client's own rate limit
// still paces them.
const sweepParallel = 4

type sweeper struct {
	p        Provider
	base     market.Query
	cap      int
	inflight chan struct{}

	mu sync.Mutex
	// seen maps an offer id to its place in chunks, where each offer
	// found is kept once (the latest answer's copy): the answers
	// themselves are dropped as they come.
	seen       map[int64]int32
	chunks     [][]market.Offer
	requests   int
	incomplete []string
	// ceiling is the answer size the marketplace was found to cap at
	// (0: none found); longest is the longest answer so far.
	ceiling, longest int
}

// bounds is a slice: dph_total in [lo, hi) (or [lo, hi] when hiIncl) and
// id in [idLo, idHi). A nil side means the user's own bound only.
type bounds struct {
	lo, hi     *float64
	hiIncl     bool
	idLo, idHi *int64
}

func (s *sweeper) run(ctx context.Context) error {
	first, full, err := s.search(ctx, bounds{})
	if err != nil || !full {
		return err
	}
	f := s.base.Filters["dph_total"]
	if _, isEq := f["eq"]; isEq {
		// One price only: nothing to split on but ids.
		return s.finish(s.idSweep(ctx, bounds{}))
	}
	lo := 0.0
	if v, ok := num(f["gte"]); ok {
		lo = v
	}
	if v, ok := num(f["gt"]); ok && v > lo {
		lo = v
	}
	hi, incl := math.NaN(), true
	if v, ok := num(f["lte"]); ok {
		hi = v
	}
	if v, ok := num(f["lt"]); ok && (math.IsNaN(hi) || v <= hi) {
		hi, incl = v, false
	}
	if math.IsNaN(hi) {
		// No upper bound given: ask for the most expensive match.
		top := s.base
		top.Order = [][2]string{{"dph_total", "desc"}}
		top.Limit = 1
		res, err := s.do(ctx, top)
		if err != nil {
			return err
		}
		if len(res) == 0 {
			return nil // the market changed under us; the first answer stands
		}
		hi, incl = res[0].DPHTotal, true
		s.add(res)
	}
	if hi < lo {
		return nil
	}
	if m, ok := cheapestFirst(first); ok && m > lo {
		lo = m // every match below m came in the first answer
	}
	return s.finish(s.split(ctx, lo, hi, incl))
}

// sweepOrder is the order every slice is asked in: cheapest first, so
// that a full answer holds every offer of the slice below its dearest
// one, and the sweep goes on from there instead of asking for those again.
var sweepOrder = [][2]string{{"dph_total", "asc"}}

// cheapestFirst returns the dearest price of a full answer whose offers
// come cheapest first, as asked: every matching offer of the slice below
// that price is in the answer (those at it may not all be). ok is false
// when the answer is not in price order (a marketplace that ignores the
// order), and the sweep splits as if it knew nothing.
func cheapestFirst(res []market.Offer) (float64, bool) {
	if len(res) == 0 || !slices.IsSortedFunc(res, func(a, b market.Offer) int { return cmp.Compare(a.DPHTotal, b.DPHTotal) }) {
		return 0, false
	}
	m := res[len(res)-1].DPHTotal
	return m, !math.IsNaN(m)
}

func (s *sweeper) finish(err error) error {
	if err != nil {
		return err
	}
	if len(s.incomplete) > 0 {
		return fmt.Errorf("%w: %d slice(s) still full, e.g. %s", ErrSweepIncomplete, len(s.incomplete), s.incomplete[0])
	}
	return nil
}

// split sweeps dph_total in [lo, hi) or [lo, hi].
func (s *sweeper) split(ctx context.Context, lo, hi float64, incl bool) error {
	b := bounds{lo: &lo, hi: &hi, hiIncl: incl}
	res, full, err := s.search(ctx, b)
	if err != nil || !full {
		return err
	}
	if m, ok := cheapestFirst(res); ok && m > lo {
		// Below m the slice is done: sweep [m, hi) (or [m, hi]).
		lo = m
		b = bounds{lo: &lo, hi: &hi, hiIncl: incl}
	}
	mid := lo + (hi-lo)/2
	if hi-lo < MinPriceSlice || mid <= lo || mid >= hi {
		return s.idSweep(ctx, b)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.split(gctx, lo, mid, false) })
	g.Go(func() error { return s.split(gctx, mid, hi, incl) })
	return g.Wait()
}

// idSweep splits a full price slice by offer id, between the smallest and
// the largest id the slice holds (two searches, which saves the dozens of
// halvings from the whole id space down to where the offers are).
func (s *sweeper) idSweep(ctx context.Context, b bounds) error {
	lo, hi := int64(0), idCeiling
	for _, dir := range []string{"asc", "desc"} {
		q := s.slice(b)
		q.Order = [][2]string{{"id", dir}}
		q.Limit = 1
		res, err := s.do(ctx, q)
		if err != nil {
			return err
		}
		if len(res) == 0 {
			return nil
		}
		s.add(res)
		if dir == "asc" {
			lo = res[0].ID
		} else {
			hi = res[0].ID + 1
		}
	}
	if hi <= lo {
		hi = lo + 1
	}
	return s.byID(ctx, b, lo, hi)
}

// byID sweeps ids in [idLo, idHi) within the price slice b.
func (s *sweeper) byID(ctx context.Context, b bounds, idLo, idHi int64) error {
	b.idLo, b.idHi = &idLo, &idHi
	_, full, err := s.search(ctx, b)
	if err != nil || !full {
		return err
	}
	if idHi-idLo <= 1 {
		s.mu.Lock()
		s.incomplete = append(s.incomplete, fmt.Sprintf("id %d", idLo))
		s.mu.Unlock()
		return nil
	}
	mid := idLo + (idHi-idLo)/2
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.byID(gctx, b, idLo, mid) })
	g.Go(func() error { return s.byID(gctx, b, mid, idHi) })
	return g.Wait()
}

// search runs one slice, cheapest first, and reports whether the answer
// was full.
func (s *sweeper) search(ctx context.Context, b bounds) (res []market.Offer, full bool, err error) {
	s.mu.Lock()
	spent := s.requests >= maxSweepRequests
	if spent {
		s.incomplete = append(s.incomplete, "request budget spent")
	}
	s.mu.Unlock()
	if spent {
		return nil, false, nil
	}
	q := s.slice(b)
	q.Order = sweepOrder
	res, err = s.do(ctx, q)
	if err != nil {
		return nil, false, err
	}
	s.add(res)
	full, err = s.full(ctx, b, res)
	return res, full, err
}

// full reports whether an answer may have been cut short. A marketplace
// may cap answers below the limit asked (a proxy capping at 300 while the
// sweep asks for 1,000), so an answer is trusted to hold the whole slice
// only when it is shorter than any cap seen: one of cap offers is full; so
// is one at the server's cap once a probe found it; so is one of a round
// size (100, 250, 300, 256, ...), the caps servers use, which costs an
// honest slice of that size one split. An answer as long as the longest
// so far, of no round size, is probed: the offers at or above its dearest
// price are asked again, and any the answer lacked prove it cut short
// (an answer not in price order is split instead).
func (s *sweeper) full(ctx context.Context, b bounds, res []market.Offer) (bool, error) {
	n := len(res)
	if n >= s.cap {
		return true, nil
	}
	if n == 0 {
		return false, nil
	}
	s.mu.Lock()
	ceiling, longest := s.ceiling, s.longest
	s.longest = max(s.longest, n)
	s.mu.Unlock()
	switch {
	case ceiling > 0:
		return n >= ceiling, nil
	case roundCap(n):
		return true, nil
	case n < longest, n < minProbe:
		return false, nil
	}
	m, ok := cheapestFirst(res)
	if !ok {
		// Unordered: nothing to probe past, so the slice is split; the
		// halves come back shorter unless the server cut them too.
		return true, nil
	}
	q := s.slice(b)
	tighten(q.Filters, "dph_total", "gte", m, true)
	q.Order = sweepOrder
	more, err := s.do(ctx, q)
	if err != nil {
		return false, err
	}
	s.add(more)
	had := make(map[int64]bool, n)
	for i := range res {
		had[res[i].ID] = true
	}
	for i := range more {
		if !had[more[i].ID] {
			s.mu.Lock()
			if s.ceiling == 0 || n < s.ceiling {
				s.ceiling = n
			}
			s.mu.Unlock()
			return true, nil
		}
	}
	return false, nil
}

// minProbe is the shortest answer probed for a cap: a server capping
// answers below it would be absurd, and a small search stays one request.
const minProbe = 20

// roundCap reports whether n is a size servers cap answers at: a multiple
// of 50 from 50, or a power of two from 64.
func roundCap(n int) bool {
	return n >= 50 && n%50 == 0 || n >= 64 && n&(n-1) == 0
}

// do runs one search, counted, with at most sweepParallel in flight.
func (s *sweeper) do(ctx context.Context, q market.Query) ([]market.Offer, error) {
	select {
	case s.inflight <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.inflight }()
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	return s.p.SearchOffers(ctx, q)
}

// sweepChunk is how many offers one chunk of the sweep's store holds.
const sweepChunk = 4096

// at is the offer kept at position p.
func (s *sweeper) at(p int32) *market.Offer { return &s.chunks[p/sweepChunk][p%sweepChunk] }

func (s *sweeper) add(res []market.Offer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range res {
		if p, ok := s.seen[res[i].ID]; ok {
			*s.at(p) = res[i]
			continue
		}
		n := len(s.seen)
		if n%sweepChunk == 0 {
			s.chunks = append(s.chunks, make([]market.Offer, 0, sweepChunk))
		}
		last := &s.chunks[len(s.chunks)-1]
		*last = append(*last, res[i])
		s.seen[res[i].ID] = int32(n)
	}
}

// slice copies the base query and narrows it to b, keeping the user's own
// bounds where they are tighter.
func (s *sweeper) slice(b bounds) market.Query {
	q := s.base
	q.Limit = s.cap
	q.Order = slices.Clone(s.base.Order)
	q.Filters = make(map[string]map[string]any, len(s.base.Filters)+2)
	for k, ops := range s.base.Filters {
		m := make(map[string]any, len(ops))
		for op, v := range ops {
			m[op] = v
		}
		q.Filters[k] = m
	}
	if b.lo != nil {
		tighten(q.Filters, "dph_total", "gte", *b.lo, true)
		if b.hiIncl {
			tighten(q.Filters, "dph_total", "lte", *b.hi, false)
		} else {
			tighten(q.Filters, "dph_total", "lt", *b.hi, false)
		}
	}
	if b.idLo != nil {
		tighten(q.Filters, "id", "gte", float64(*b.idLo), true)
		tighten(q.Filters, "id", "lt", float64(*b.idHi), false)
	}
	return q
}

// tighten sets filters[field][op] = v unless the user's value there is
// already tighter (larger for a lower bound, smaller for an upper one).
func tighten(filters map[string]map[string]any, field, op string, v float64, lower bool) {
	m := filters[field]
	if m == nil {
		m = map[string]any{}
		filters[field] = m
	}
	if old, ok := num(m[op]); ok && (lower && old > v || !lower && old < v) {
		return
	}
	m[op] = v
}

// num reads a filter value, which the CLI sends as a string ("0.5") or a
// number.
func num(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}
