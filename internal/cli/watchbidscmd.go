package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/bidwatch"
	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/localmarket"
	"github.com/vastfleet/vastfleet/internal/store"
)

// The bid watcher (package bidwatch): a launch or rent with bids starts a
// detached `vastfleet watch-bids` for its data dir.
// VASTFLEET_BID_WATCH=off starts none.

func newWatchBidsCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:    "watch-bids",
		Short:  "List this data dir's interruptible instances every 15s while any is kept (started by launch and rent with bids)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			os.Unsetenv(RunAsMainEnv)
			d, err := f.bidWatchDeps(cmd.Context())
			if err != nil {
				return err
			}
			return bidwatch.Detached(cmd.Context(), d, f.io.ErrOut)
		},
	}
}

// bidWatchDeps are a bid watch's on this data dir and market.
func (f *factory) bidWatchDeps(ctx context.Context) (bidwatch.Deps, error) {
	dir, err := f.dataDir()
	if err != nil {
		return bidwatch.Deps{}, err
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return bidwatch.Deps{}, err
	}
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return bidwatch.Deps{}, err
	}
	d := bidwatch.Deps{Dir: dir, Provider: p, Store: st, Clock: f.Clock(), Log: f.log, SelfStops: f.deadManMoments(st)}
	if f.opts.Market == "sim" && f.opts.APIURL == "" && f.usesLocalMarket() {
		d.MarketStopped = func(ctx context.Context) bool {
			_, ok := localmarket.Served(ctx, filepath.Join(dir, "sim"))
			return !ok
		}
	}
	return d, nil
}

// watchBidsWhileCoordinating is the coordinator's bid watch.
func (f *factory) watchBidsWhileCoordinating(ctx context.Context) {
	d, err := f.bidWatchDeps(ctx)
	if err != nil {
		f.log.Warn("no bid watch", "err", err)
		return
	}
	bidwatch.Coordinate(ctx, d)
}

// startBidWatcher starts the data dir's bid watcher, unless
// VASTFLEET_BID_WATCH is off or the market lives only in this process.
// A watcher that cannot start costs the ledger precision only: it is
// said, never an error.
func (f *factory) startBidWatcher() {
	switch f.io.Getenv("VASTFLEET_BID_WATCH") {
	case "0", "off", "false":
		return
	}
	if f.opts.Market == "sim" && f.opts.APIURL == "" && !f.usesLocalMarket() {
		return
	}
	dir, err := f.dataDir()
	if err != nil {
		return
	}
	exe, err := os.Executable()
	if err == nil {
		err = bidwatch.Spawn(bidwatch.Process{Exe: exe, DataDir: dir, Market: f.opts.Market, APIURL: f.opts.APIURL, APIRate: f.opts.APIRate,
			Verbose: f.opts.Verbose, APIKey: f.opts.APIKey, Env: append(os.Environ(), RunAsMainEnv+"=1")})
	}
	if err != nil {
		fmt.Fprintf(f.io.ErrOut, "warning: no bid watcher (%v): an outbid before the next command is dated mid-way to it\n", err)
		return
	}
	fmt.Fprintf(f.io.ErrOut, "vastfleet: a bid watcher lists the interruptible instances every %s until none is kept (at most %s; log %s)\n",
		fleet.BidWatchEvery, fleet.BidWatchFor, filepath.Join(dir, bidwatch.LogFile))
}

// reapHolder names a coordinator's reaping pass in the data dir's lock.
var reapHolder = holderName("coord", "(reaping silent instances)")

// lockWaitFor bounds how long a command waits for a background pass to
// let go of the lock.
const lockWaitFor = time.Minute

// acquireLock takes the data dir's writer lock for a command: held by a
// background pass (a bid watcher's or a coordinator's listing), the
// command waits for it, up to lockWaitFor; held by another command, it
// is refused at once.
func acquireLock(ctx context.Context, dir, holder string) (*store.Lock, error) {
	wall := clock.Wall{}
	deadline := wall.Now().Add(lockWaitFor)
	return store.AcquireLockBehind(ctx, dir, holder, []string{bidwatch.Holder, reapHolder}, func(ctx context.Context) (bool, error) {
		return wall.Now().Before(deadline), wall.Sleep(ctx, 100*time.Millisecond)
	})
}
