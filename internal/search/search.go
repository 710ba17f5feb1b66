// Package search finds offers and ranks them: one search of the
// marketplace, a sweep past its cap, or a file of offers kept earlier,
// filtered, ordered and limited exactly as the marketplace would.
package search

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
)

// ErrNoNewForm: the marketplace has no second search form.
var ErrNoNewForm = errors.New("this marketplace has no other search form")

// Options is how to search.
type Options struct {
	// NewForm sends every search in the vastai CLI's --new form.
	NewForm bool
	// Sweep, when > 0, sweeps price slices of up to that many offers
	// until every match is collected; 0 asks one search.
	Sweep int
	// Page is how many offers a scored one-search asks, to rank the best
	// of a full page rather than the marketplace's first N.
	Page int
	// Scorer ranks the offers; nil keeps the marketplace's order.
	Scorer market.Scorer
	// Notes takes a line saying what was searched; nil discards it.
	Notes io.Writer
}

// newSearcher searches in the vastai CLI's --new form.
type newSearcher interface {
	SearchOffersNew(ctx context.Context, q market.Query) ([]market.Offer, error)
}

// newFormSearch is a provider whose searches (sweeps included) go out in
// the --new form.
type newFormSearch struct {
	provider.Provider
	new newSearcher
}

func (p newFormSearch) SearchOffers(ctx context.Context, q market.Query) ([]market.Offer, error) {
	return p.new.SearchOffersNew(ctx, q)
}

// Live runs the search (or the sweep) on the marketplace and ranks the
// result, keeping q.Limit offers.
func Live(ctx context.Context, p provider.Provider, q market.Query, opts Options) ([]market.Ranked, error) {
	notes := opts.Notes
	if notes == nil {
		notes = io.Discard
	}
	if opts.NewForm {
		ns, ok := p.(newSearcher)
		if !ok {
			return nil, ErrNoNewForm
		}
		p = newFormSearch{Provider: p, new: ns}
	}
	limit := q.Limit
	var offers []market.Offer
	if opts.Sweep > 0 {
		q.Limit = 0
		var requests int
		var err error
		offers, requests, err = provider.SweepOffers(ctx, p, q, opts.Sweep)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(notes, "swept %d offers in %d requests\n", len(offers), requests)
		if opts.Scorer == nil {
			// A ranking orders by score, dph_total and id, which the
			// sweep's distinct ids leave no tie in: the order keys
			// matter only when nothing scores.
			market.SortOffers(offers, q.Order)
		}
	} else {
		asked := OnePageQuery(q, opts.Scorer, opts.Page)
		var err error
		offers, err = p.SearchOffers(ctx, asked)
		if err != nil {
			return nil, err
		}
		if len(offers) > 0 && (asked.Limit == 0 || len(offers) >= asked.Limit) {
			fmt.Fprintf(notes, "ranked the %d offers of one search (the marketplace caps each answer); --all ranks every matching offer\n", len(offers))
		}
	}
	ranked, err := rankOrKeep(ctx, offers, opts.Scorer)
	if err != nil {
		return nil, err
	}
	if limit > 0 && len(ranked) > limit {
		ranked = ranked[:limit]
	}
	return ranked, nil
}

// OnePageQuery is what a search without a sweep asks the marketplace for.
// A limit N keeps the N best offers by the ranking, as it does with a
// sweep and a file: without a score the marketplace's order is the
// ranking, so asking for N is the same; with a score the N best are
// picked from a full page, not from the first N in the marketplace's
// order.
func OnePageQuery(q market.Query, s market.Scorer, page int) market.Query {
	if s != nil && q.Limit > 0 {
		q.Limit = max(q.Limit, page)
	}
	return q
}

// File applies the query, the score, the order and the limit to offers
// kept in a file (any form market.ScanOffers reads), exactly as the
// marketplace and a live search would.
func File(ctx context.Context, data []byte, q market.Query, s market.Scorer) ([]market.Ranked, error) {
	filter, err := market.Compile(q)
	if err != nil {
		return nil, &QueryError{err}
	}
	if s != nil {
		return market.RankScan(ctx, data, filter.Match, s, q.Limit)
	}
	// Only the offers the query keeps are copied out of the scanner.
	var kept []market.Offer
	err = market.ScanOffers(data, func(o *market.Offer) error {
		if filter.Match(o) {
			kept = append(kept, *o)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	market.SortOffers(kept, q.Order)
	if q.Limit > 0 && len(kept) > q.Limit {
		kept = kept[:q.Limit]
	}
	return rankOrKeep(ctx, kept, nil)
}

// ParseQuery parses a query given as words, as `vastai search offers`
// does; a first word "offers" is dropped (`search offers ...`, as with the
// vastai CLI). Warnings are unknown fields sent as written. A query the
// user got wrong is a *QueryError.
func ParseQuery(words []string, opts market.ParseOptions) (market.Query, []market.Warning, error) {
	if opts.Limit < 0 {
		return market.Query{}, nil, &QueryError{fmt.Errorf("--limit %d: must be 0 (no limit) or more", opts.Limit)}
	}
	if len(words) > 0 && words[0] == "offers" {
		words = words[1:]
	}
	q, warnings, err := market.Parse(strings.Join(words, " "), opts)
	if err != nil {
		return market.Query{}, warnings, &QueryError{err}
	}
	return q, warnings, nil
}

// FromFile ranks the offers of the file at path ("-": stdin) as File does.
// A file that cannot be read or scanned is named in the error as --from.
func FromFile(ctx context.Context, stdin io.Reader, path string, q market.Query, s market.Scorer) ([]market.Ranked, error) {
	data, release, err := ReadOffersFile(stdin, path)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	defer release()
	ranked, err := File(ctx, data, q, s)
	if err != nil && !errors.As(err, new(*QueryError)) {
		return nil, fmt.Errorf("--from %s: %w", path, err)
	}
	return ranked, err
}

// QueryError is a search the user's input makes impossible: a query the
// offers cannot be filtered by, or a ranking asked wrong.
type QueryError struct{ Err error }

func (e *QueryError) Error() string { return e.Err.Error() }
func (e *QueryError) Unwrap() error { return e.Err }

// rankOrKeep ranks by s, or keeps the marketplace's order with its own
// score. A ranking stops at the first Ctrl+C.
func rankOrKeep(ctx context.Context, offers []market.Offer, s market.Scorer) ([]market.Ranked, error) {
	if s != nil {
		return market.RankContext(ctx, offers, s)
	}
	out := make([]market.Ranked, len(offers))
	for i, o := range offers {
		out[i] = market.Ranked{Offer: o, Score: o.VastScore}
	}
	return out, nil
}
