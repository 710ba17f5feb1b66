// Package bidwatch keeps a data dir's interruptible instances listed
// between commands. A launch or rent with bids leaves instances that a
// rival may stop and that resume by themselves, and nothing lists between
// two commands (fleet.WatchBids says why that matters to the cost). Spawn
// starts a detached `vastfleet watch-bids` for the data dir; Detached is
// that process's body, one at a time per data dir, listing every
// fleet.BidWatchEvery until no interruptible instance is kept, for at most
// fleet.BidWatchFor. Coordinate is the same watch inside a coordinator.
package bidwatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/filelock"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// LogFile is the detached watcher's log, in the data dir.
const LogFile = "bidwatch.log"

// LockFile, in the data dir, keeps one detached watcher per data dir.
const LockFile = "bidwatch.lock"

// Holder names a watcher's listing in the data dir's writer lock, which
// it holds for one listing at a time; a command waits for it
// (store.AcquireLockBehind).
const Holder = "vastfleet watch-bids (listing interruptible instances)"

// LookEvery is how often a coordinator whose data dir keeps no
// interruptible instance looks for one.
const LookEvery = time.Minute

// Deps are what a watch lists with.
type Deps struct {
	Dir      string // the data dir
	Provider provider.Provider
	Store    *store.Store
	Clock    clock.Clock // market time
	Log      *slog.Logger
	// SelfStops dates what the agents' dead-man switches did
	// (fleet.Manager.SelfStops); nil: nothing.
	SelfStops func(context.Context) (map[int64]time.Time, error)
	// MarketStopped says the market watched is gone for good (a stopped
	// local market, which a watcher does not start again); nil: never.
	MarketStopped func(context.Context) bool
}

// Writer takes the data dir's lock for the moment of one listing, or
// gives fleet.ErrWatchOver once the data dir, or the market, is gone.
func (d Deps) Writer() fleet.Writer {
	return func(ctx context.Context) (*fleet.Manager, func(), error) {
		if _, err := os.Stat(d.Dir); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", fleet.ErrWatchOver, err)
		}
		if d.MarketStopped != nil && d.MarketStopped(ctx) {
			return nil, nil, fmt.Errorf("%w: the local market was stopped", fleet.ErrWatchOver)
		}
		lock, err := store.AcquireLock(d.Dir, Holder)
		if err != nil {
			return nil, nil, err
		}
		return &fleet.Manager{P: d.Provider, S: d.Store, Clock: d.Clock, Log: d.Log, SelfStops: d.SelfStops}, func() { lock.Unlock() }, nil
	}
}

// passFailed logs a failed pass; a busy lock is a command listing for
// itself, not worth a word.
func (d Deps) passFailed(err error) {
	if !errors.Is(err, store.ErrLocked) && d.Log != nil {
		d.Log.Warn("bid watcher: no listing this time", "err", err)
	}
}

// Detached is the detached watcher's body: unless another watcher has
// the data dir, it watches for at most fleet.BidWatchFor, saying on out
// when it starts and why it ends.
func Detached(ctx context.Context, d Deps, out io.Writer) error {
	lf, err := os.OpenFile(filepath.Join(d.Dir, LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := filelock.TryLock(lf); err != nil {
		return nil // another watcher has this data dir
	}
	defer filelock.Unlock(lf)
	fmt.Fprintf(out, "bid watcher (pid %d): a listing every %s while interruptible instances are kept, for at most %s\n",
		os.Getpid(), fleet.BidWatchEvery, fleet.BidWatchFor)
	err = fleet.WatchBids(ctx, fleet.BidWatch{Clock: AtLeastWall{d.Clock, time.Second}, For: fleet.BidWatchFor, Writer: d.Writer(), Failed: d.passFailed})
	switch {
	case err == nil:
		fmt.Fprintln(out, "bid watcher ends: no interruptible instance is kept, or its time is up")
	case errors.Is(err, fleet.ErrWatchOver):
		fmt.Fprintf(out, "bid watcher ends: %v\n", err)
		return nil
	}
	return err
}

// Coordinate is the coordinator's bid watch: it lists every
// fleet.BidWatchEvery while the data dir keeps interruptible instances,
// and looks again every LookEvery when it keeps none (a launch may rent
// some while the coordinator runs), until ctx ends or the data dir goes.
func Coordinate(ctx context.Context, d Deps) {
	clk := AtLeastWall{d.Clock, time.Second}
	for {
		err := fleet.WatchBids(ctx, fleet.BidWatch{Clock: clk, Writer: d.Writer(), Failed: d.passFailed})
		if err != nil {
			if !errors.Is(err, fleet.ErrWatchOver) && d.Log != nil {
				d.Log.Warn("bid watch ends", "err", err)
			}
			return
		}
		if clk.Sleep(ctx, LookEvery) != nil {
			return
		}
	}
}

// AtLeastWall is a market clock whose sleeps last at least Min of wall
// time: a simulated market that runs many times faster than the wall is
// not listed many times a second.
type AtLeastWall struct {
	clock.Clock
	Min time.Duration
}

func (c AtLeastWall) Sleep(ctx context.Context, d time.Duration) error {
	wall := clock.Wall{}
	start := wall.Now()
	if err := c.Clock.Sleep(ctx, d); err != nil {
		return err
	}
	if rest := c.Min - wall.Now().Sub(start); rest > 0 {
		return wall.Sleep(ctx, rest)
	}
	return nil
}
