package fleet

import (
	"context"
	"errors"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/provider"
)

// An interruptible instance is stopped by a rival's higher bid, and
// resumes when it has the machine again, without notice (vast-api.md
// §11); its listing row says so (stopped where it is meant to run), but
// carries no time of either. Compute bills only while it runs, so the
// ledger can date an outbid or a resume no closer than the listings
// around it: the middle of the gap, off by up to half of it. Between two
// commands nothing lists, and a gap of minutes is dollars' worth of error
// on one instance. A bid watcher lists the account every BidWatchEvery
// while this data dir keeps interruptible instances, which holds each
// such error to half of that.

// BidWatchEvery is how often a bid watcher lists (market time): an outbid
// or a resume is dated within half of it, under a cent of compute per
// instance at up to $4.8/h.
const BidWatchEvery = 15 * time.Second

// BidWatchFor bounds a bid watcher that runs on its own (one the CLI
// starts for a launch or rent with bids): it ends after this long even
// with interruptible instances live. A coordinator watches while it runs.
const BidWatchFor = 72 * time.Hour

// ErrWatchOver, from a Writer, ends a bid watch: its data dir is gone.
var ErrWatchOver = errors.New("nothing left to watch")

// Writer takes the data dir's lock and gives a manager that may write,
// and the lock's release; an error when the lock is busy (its holder
// lists for itself) or the marketplace cannot be reached.
type Writer func(context.Context) (*Manager, func(), error)

// BidPass lists the account once through a writer, recording what each
// instance's row shows (Reconcile), and says whether this store still
// keeps an interruptible instance. A busy writer lists nothing and
// counts as still watching: the command holding the lock lists itself.
func BidPass(ctx context.Context, w Writer) (bids bool, err error) {
	m, release, err := w(ctx)
	if err != nil {
		return true, err
	}
	defer release()
	rep, err := m.Reconcile(ctx, ReconcileOptions{})
	if err != nil {
		return true, err
	}
	return rep.Interruptible > 0, nil
}

// BidWatch is a watch over a data dir's interruptible instances.
type BidWatch struct {
	Clock clock.Clock // market time
	// Every spaces the listings; 0: BidWatchEvery.
	Every time.Duration
	// For ends the watch that long after it began; 0: never (until no
	// interruptible instance is kept, or ctx ends).
	For    time.Duration
	Writer Writer
	// Failed is told each failed pass; the watch goes on. A key the
	// marketplace refuses, another account's key, or ErrWatchOver ends
	// it.
	Failed func(error)
}

// WatchBids lists every w.Every until a pass finds no interruptible
// instance kept, w.For has passed, or ctx ends. It returns nil then, or
// the error that ended it (see BidWatch.Failed).
func WatchBids(ctx context.Context, w BidWatch) error {
	every := w.Every
	if every <= 0 {
		every = BidWatchEvery
	}
	start := w.Clock.Now()
	for {
		bids, err := BidPass(ctx, w.Writer)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if errors.Is(err, provider.ErrAuth) || errors.Is(err, ErrWrongAccount) || errors.Is(err, ErrWatchOver) {
				return err
			}
			if w.Failed != nil {
				w.Failed(err)
			}
		} else if !bids {
			return nil
		}
		if w.For > 0 && w.Clock.Now().Sub(start) >= w.For {
			return nil
		}
		if err := w.Clock.Sleep(ctx, every); err != nil {
			return nil
		}
	}
}
