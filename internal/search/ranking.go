package search

import (
	"fmt"
	"runtime/debug"

	"github.com/vastfleet/vastfleet/internal/market"
)

// Ranking is how offers are to be scored, as asked: a named score (By), an
// expression over offer fields (Score), or Default when neither is given.
type Ranking struct {
	By, Score, Default string
}

// Scorer picks the score; nil when no ranking is asked for and there is no
// default. useful builds the scorer of "useful", which needs the launch and
// the host records the caller has. A choice the user got wrong is a
// *QueryError.
func (r Ranking) Scorer(useful func() (market.Scorer, error)) (market.Scorer, error) {
	if r.Score != "" {
		if r.By != "" {
			return nil, &QueryError{fmt.Errorf("--by %s and --score: pick one", r.By)}
		}
		s, err := market.ScoreExpr(r.Score)
		if err != nil {
			return nil, &QueryError{fmt.Errorf("--score: %v", err)}
		}
		return s, nil
	}
	by := r.By
	if by == "" {
		by = r.Default
	}
	if by == "" {
		return nil, nil
	}
	s, err := market.ScoreBy(by)
	if err != nil {
		return nil, &QueryError{fmt.Errorf("--by: %v", err)}
	}
	if _, ok := s.(*market.Useful); ok {
		return useful()
	}
	return s, nil
}

// wholeMarketMemoryLimit is the soft heap bound of a search over a whole
// market.
const wholeMarketMemoryLimit = 160 << 20

// TuneForWholeMarket sets the garbage collector for a whole market passing
// through, short-lived: collect less often, but never let the heap pass a
// bound a laptop keeps. The returned func restores the settings.
func TuneForWholeMarket() (restore func()) {
	gc := debug.SetGCPercent(400)
	limit := debug.SetMemoryLimit(wholeMarketMemoryLimit)
	return func() {
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(gc)
	}
}
