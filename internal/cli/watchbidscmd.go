package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/filelock"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/localmarket"
	"github.com/vastfleet/vastfleet/internal/procgroup"
	"github.com/vastfleet/vastfleet/internal/store"
)

// The bid watcher: a launch or rent with bids leaves interruptible
// instances that a rival may stop and that resume by themselves, and
// nothing lists between two commands (fleet.WatchBids says why that
// matters to the cost). The command starts a detached `vastfleet
// watch-bids` for its data dir, one at a time, which lists every
// fleet.BidWatchEvery until no interruptible instance is kept, for at
// most fleet.BidWatchFor. VASTFLEET_BID_WATCH=off starts none.

// bidWatchLog is the watcher's log, in the data dir.
const bidWatchLog = "bidwatch.log"

// bidWatchLock keeps one watcher per data dir.
const bidWatchLock = "bidwatch.lock"

func newWatchBidsCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:    "watch-bids",
		Short:  "List this data dir's interruptible instances every 15s while any is kept (started by launch and rent with bids)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return watchBidsRun(cmd.Context(), f)
		},
	}
}

func watchBidsRun(ctx context.Context, f *factory) error {
	os.Unsetenv(RunAsMainEnv)
	dir, err := f.dataDir()
	if err != nil {
		return err
	}
	lf, err := os.OpenFile(filepath.Join(dir, bidWatchLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := filelock.TryLock(lf); err != nil {
		return nil // another watcher has this data dir
	}
	defer filelock.Unlock(lf)
	writer, err := f.bidWatchWriter(ctx, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(f.io.ErrOut, "bid watcher (pid %d): a listing every %s while interruptible instances are kept, for at most %s\n",
		os.Getpid(), fleet.BidWatchEvery, fleet.BidWatchFor)
	err = fleet.WatchBids(ctx, fleet.BidWatch{Clock: atLeastWall{f.Clock(), time.Second}, For: fleet.BidWatchFor, Writer: writer, Failed: f.bidPassFailed})
	switch {
	case err == nil:
		fmt.Fprintln(f.io.ErrOut, "bid watcher ends: no interruptible instance is kept, or its time is up")
	case errors.Is(err, fleet.ErrWatchOver):
		fmt.Fprintf(f.io.ErrOut, "bid watcher ends: %v\n", err)
		return nil
	}
	return err
}

func (f *factory) bidPassFailed(err error) {
	if !errors.Is(err, store.ErrLocked) {
		f.log.Warn("bid watcher: no listing this time", "err", err)
	}
}

// bidWatchWriter gives a bid watch its writer on data dir dir: the
// store's lock for the moment of one listing, or fleet.ErrWatchOver once
// the data dir, or the local market it was watched on, is gone.
func (f *factory) bidWatchWriter(ctx context.Context, dir string) (fleet.Writer, error) {
	local := f.opts.Market == "sim" && f.opts.APIURL == "" && f.usesLocalMarket()
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, err
	}
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (*fleet.Manager, func(), error) {
		if _, err := os.Stat(dir); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", fleet.ErrWatchOver, err)
		}
		if local {
			// A stopped local market is not started again by a watcher.
			if _, ok := localmarket.Served(ctx, filepath.Join(dir, "sim")); !ok {
				return nil, nil, fmt.Errorf("%w: the local market was stopped", fleet.ErrWatchOver)
			}
		}
		lock, err := store.AcquireLock(dir, bidWatchHolder)
		if err != nil {
			return nil, nil, err
		}
		return &fleet.Manager{P: p, S: st, Clock: f.Clock(), Log: f.log, SelfStops: f.deadManMoments(st)}, func() { lock.Unlock() }, nil
	}, nil
}

// watchBidsWhileCoordinating is the coordinator's bid watch: it lists
// every fleet.BidWatchEvery while the data dir keeps interruptible
// instances, and looks again every bidLookEvery when it keeps none (a
// launch may rent some while the coordinator runs).
func (f *factory) watchBidsWhileCoordinating(ctx context.Context) {
	dir, err := f.dataDir()
	if err != nil {
		return
	}
	writer, err := f.bidWatchWriter(ctx, dir)
	if err != nil {
		f.log.Warn("no bid watch", "err", err)
		return
	}
	clk := atLeastWall{f.Clock(), time.Second}
	for {
		err := fleet.WatchBids(ctx, fleet.BidWatch{Clock: clk, Writer: writer, Failed: f.bidPassFailed})
		if err != nil {
			if !errors.Is(err, fleet.ErrWatchOver) {
				f.log.Warn("bid watch ends", "err", err)
			}
			return
		}
		if clk.Sleep(ctx, bidLookEvery) != nil {
			return
		}
	}
}

// bidLookEvery is how often a coordinator whose data dir keeps no
// interruptible instance looks for one.
const bidLookEvery = time.Minute

// startBidWatcher starts the data dir's bid watcher, unless one runs,
// VASTFLEET_BID_WATCH is off, or the market lives only in this process.
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
	if err := f.spawnBidWatcher(dir); err != nil {
		fmt.Fprintf(f.io.ErrOut, "warning: no bid watcher (%v): an outbid before the next command is dated mid-way to it\n", err)
		return
	}
	fmt.Fprintf(f.io.ErrOut, "vastfleet: a bid watcher lists the interruptible instances every %s until none is kept (at most %s; log %s)\n",
		fleet.BidWatchEvery, fleet.BidWatchFor, filepath.Join(dir, bidWatchLog))
}

func (f *factory) spawnBidWatcher(dir string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"--data-dir", dir, "--market", f.opts.Market, "--api-rate", strconv.FormatFloat(f.opts.APIRate, 'g', -1, 64)}
	if f.opts.APIURL != "" {
		args = append(args, "--api-url", f.opts.APIURL)
	}
	if f.opts.Verbose {
		args = append(args, "--verbose")
	}
	cmd := exec.Command(exe, append(args, "watch-bids")...)
	cmd.Env = append(os.Environ(), RunAsMainEnv+"=1")
	if f.opts.APIKey != "" {
		// The key travels in the environment, never in argv (ps shows it).
		cmd.Env = append(cmd.Env, "VAST_API_KEY="+f.opts.APIKey)
	}
	log, err := os.OpenFile(filepath.Join(dir, bidWatchLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(log, "%s: started by pid %d\n", clock.Wall{}.Now().UTC().Format(time.RFC3339), os.Getpid())
	cmd.Stdout, cmd.Stderr = log, log
	procgroup.Detach(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// atLeastWall is a market clock whose sleeps last at least min of wall
// time: a simulated market that runs many times faster than the wall is
// not listed many times a second.
type atLeastWall struct {
	clock.Clock
	min time.Duration
}

func (c atLeastWall) Sleep(ctx context.Context, d time.Duration) error {
	start := clock.Wall{}.Now()
	if err := c.Clock.Sleep(ctx, d); err != nil {
		return err
	}
	wall := clock.Wall{}
	if rest := c.min - wall.Now().Sub(start); rest > 0 {
		return wall.Sleep(ctx, rest)
	}
	return nil
}

// The holders of a background pass, which keep the data dir's lock for
// one listing at a time.
var (
	bidWatchHolder = holderName("watch-bids", "(listing interruptible instances)")
	reapHolder     = holderName("coord", "(reaping silent instances)")
)

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
	return acquireLockPausing(ctx, dir, holder, func(ctx context.Context) (bool, error) {
		return wall.Now().Before(deadline), wall.Sleep(ctx, 100*time.Millisecond)
	})
}

// acquireLockPausing is acquireLock with its waits: pause waits a moment
// and says whether to try again.
func acquireLockPausing(ctx context.Context, dir, holder string, pause func(context.Context) (bool, error)) (*store.Lock, error) {
	for {
		l, err := store.AcquireLock(dir, holder)
		var held *store.LockedError
		if err == nil || !errors.As(err, &held) || held.Holder.Command != bidWatchHolder && held.Holder.Command != reapHolder {
			return l, err
		}
		again, perr := pause(ctx)
		if perr != nil {
			return nil, perr
		}
		if !again {
			return nil, err
		}
	}
}
