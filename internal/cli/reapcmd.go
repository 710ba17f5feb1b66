package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

type reapOptions struct {
	Fleet     string
	After     time.Duration
	Policy    string
	AfterSet  bool
	PolicySet bool
}

func newReapCmd(f *factory, runF func(context.Context, *reapOptions) error) *cobra.Command {
	opts := &reapOptions{}
	cmd := &cobra.Command{
		Use:   "reap [--fleet F]",
		Short: "Stop or destroy instances whose agent has fallen silent (the dead-man switch, from outside)",
		Long: `Stop or destroy this data dir's instances whose agent has not reported to
the coordinator for longer than the fleet's --orphan-after. A stopped or
outbid container cannot run its own dead-man switch, so vastfleet does it
from outside; the coordinator does the same while it runs.

Each fleet is reaped as it was launched (launch --coord --orphan-after and
--orphan-policy, recorded in DATA_DIR/coord.db); the flags here override.
The fleet's teardown ladder (launch --max-lifetime, --stopped-for) is
applied first: an instance past its lifetime is stopped, one stopped for
longer than --stopped-for is destroyed.
Only instances whose label names this data dir and the fleet are touched,
and only those whose agent reported at least once: silence from an agent
never heard is not evidence. Every action is logged and noted on the
instance, where ls shows it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.AfterSet = cmd.Flags().Changed("orphan-after")
			opts.PolicySet = cmd.Flags().Changed("orphan-policy")
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return reapRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Fleet, "fleet", "", "only this fleet (default: every fleet)")
	fl.DurationVar(&opts.After, "orphan-after", wire.DefaultOrphanAft, "silence after which an instance is reaped (default: the fleet's, as launched)")
	fl.StringVar(&opts.Policy, "orphan-policy", wire.PolicyStop, "stop or destroy (default: the fleet's, as launched)")
	limitFlags(fl, bounds{"orphan-after", "1m", "8760h"})
	return cmd
}

func reapRun(ctx context.Context, f *factory, opts *reapOptions) error {
	if opts.Policy != wire.PolicyStop && opts.Policy != wire.PolicyDestroy {
		return usagef("--orphan-policy %q: use stop or destroy", opts.Policy)
	}
	m, err := f.refreshed(ctx, holderName("reap"))
	if err != nil {
		return err
	}
	var db *coord.DB
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	res, err := m.Sweep(ctx, fleet.Sweep{
		Fleet:  opts.Fleet,
		Switch: fleet.Switch{After: opts.After, Policy: opts.Policy, AfterSet: opts.AfterSet, PolicySet: opts.PolicySet},
		Heartbeats: func(ctx context.Context) (fleet.Heartbeats, error) {
			var err error
			if db, err = f.existingCoordDB(ctx); db == nil {
				return nil, err
			}
			return db, nil
		},
		OnLaddered: f.reportLaddered, OnReaped: f.reportReaped,
	})
	switch {
	case err != nil:
		return err
	case res.NoCoordinator:
		fmt.Fprintln(f.io.ErrOut, "no coordinator has run for this data dir: no agent's silence to go by")
	case res.Reaped == 0:
		fmt.Fprintln(f.io.ErrOut, "no silent instances")
	}
	return errors.Join(res.Failed...)
}

func (f *factory) reportLaddered(fleetName string, d fleet.Laddered) { f.report(d.Report(fleetName)) }

func (f *factory) reportReaped(fleetName string, r fleet.Reaped) { f.report(r.Report(fleetName)) }

// report prints a line of what was done, a failure on the error stream.
func (f *factory) report(line string, failed bool) {
	w := f.io.Out
	if failed {
		w = f.io.ErrOut
	}
	fmt.Fprintln(w, line)
}

// reapWhileCoordinating applies the fleets' teardown ladders and reaps
// silent instances every `every` of market time while the coordinator
// runs, with the switch the coordinator tells agents: each fleet's own,
// after and policy only where a fleet recorded none. Silence
// counts from the coordinator's start at the earliest (it heard nobody
// while it was down), and the data dir's lock is taken only for a pass
// that has something to do, so ls, launch and destroy in other terminals
// are not kept waiting.
func (f *factory) reapWhileCoordinating(ctx context.Context, db *coord.DB, after time.Duration, policy string, every time.Duration) {
	dir, err := f.dataDir()
	if err != nil {
		return
	}
	since := f.Clock().Now()
	// every is market time: on a simulated market that runs faster than
	// the wall, a ladder step is due that much sooner, so the pass comes
	// as often in market time (once a wall second at most).
	fleet.PassEvery(ctx, max(time.Duration(float64(every)/f.simScale()), time.Second), f.log, func(ctx context.Context) error {
		return f.reapPass(ctx, dir, db, after, policy, since)
	})
}

func (f *factory) reapPass(ctx context.Context, dir string, db *coord.DB, after time.Duration, policy string, since time.Time) error {
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return err
	}
	look := &fleet.Manager{S: st, Clock: f.Clock(), Log: f.log} // reads only
	return look.ReapPass(ctx, fleet.Pass{
		Heartbeats: db, Switch: fleet.Switch{After: after, Policy: policy}, Since: since,
		Writer: func(ctx context.Context) (*fleet.Manager, func(), error) {
			lock, err := store.AcquireLock(dir, reapHolder)
			if err != nil {
				return nil, nil, err
			}
			p, err := f.Provider(ctx)
			if err != nil {
				lock.Unlock()
				return nil, nil, err
			}
			return &fleet.Manager{P: p, S: st, Clock: f.Clock(), Log: f.log}, func() { lock.Unlock() }, nil
		},
		OnLaddered: f.reportLaddered, OnReaped: f.reportReaped,
	})
}

// deadManMoments reads, from the data dir's coordinator database where
// one exists, when each instance's agent will have stopped or destroyed
// it by its dead-man switch (fleet.DeadManMoments). A reconcile after the
// coordinator was gone for a while (up --resume, down, ls, cost) then
// dates what the agents did at the moment they did it.
func (f *factory) deadManMoments(st *store.Store) func(context.Context) (map[int64]time.Time, error) {
	return func(ctx context.Context) (map[int64]time.Time, error) {
		db, err := f.existingCoordDB(ctx)
		if db == nil {
			return nil, err // no coordinator ever ran: no agent had a switch armed by one
		}
		defer db.Close()
		return fleet.DeadManMoments(ctx, st, db)
	}
}
