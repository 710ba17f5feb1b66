package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/factory"
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

func newReapCmd(f *factory.Factory, runF func(context.Context, *reapOptions) error) *cobra.Command {
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

func reapRun(ctx context.Context, f *factory.Factory, opts *reapOptions) error {
	if opts.Policy != wire.PolicyStop && opts.Policy != wire.PolicyDestroy {
		return usagef("--orphan-policy %q: use stop or destroy", opts.Policy)
	}
	m, err := f.Refreshed(ctx, factory.HolderName("reap"))
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
			if db, err = f.ExistingCoordDB(ctx); db == nil {
				return nil, err
			}
			return db, nil
		},
		OnLaddered: reporter{f}.laddered, OnReaped: reporter{f}.reaped,
	})
	switch {
	case err != nil:
		return err
	case res.NoCoordinator:
		fmt.Fprintln(f.IO.ErrOut, "no coordinator has run for this data dir: no agent's silence to go by")
	case res.Reaped == 0:
		fmt.Fprintln(f.IO.ErrOut, "no silent instances")
	}
	return errors.Join(res.Failed...)
}

// reporter prints what a reap pass did (its OnLaddered, OnReaped).
type reporter struct{ f *factory.Factory }

func (r reporter) laddered(fleetName string, d fleet.Laddered) { r.report(d.Report(fleetName)) }

func (r reporter) reaped(fleetName string, x fleet.Reaped) { r.report(x.Report(fleetName)) }

// report prints a line of what was done, a failure on the error stream.
func (r reporter) report(line string, failed bool) {
	w := r.f.IO.Out
	if failed {
		w = r.f.IO.ErrOut
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
func reapWhileCoordinating(ctx context.Context, f *factory.Factory, db *coord.DB, after time.Duration, policy string, every time.Duration) {
	dir, err := f.DataDir()
	if err != nil {
		return
	}
	since := f.Clock().Now()
	// every is market time: on a simulated market that runs faster than
	// the wall, a ladder step is due that much sooner, so the pass comes
	// as often in market time (once a wall second at most).
	fleet.PassEvery(ctx, max(time.Duration(float64(every)/f.SimScale()), time.Second), f.Log, func(ctx context.Context) error {
		return reapPass(ctx, f, dir, db, after, policy, since)
	})
}

func reapPass(ctx context.Context, f *factory.Factory, dir string, db *coord.DB, after time.Duration, policy string, since time.Time) error {
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return err
	}
	look := &fleet.Manager{S: st, Clock: f.Clock(), Log: f.Log} // reads only
	return look.ReapPass(ctx, fleet.Pass{
		Heartbeats: db, Switch: fleet.Switch{After: after, Policy: policy}, Since: since,
		Writer: func(ctx context.Context) (*fleet.Manager, func(), error) {
			lock, err := store.AcquireLock(dir, factory.ReapHolder)
			if err != nil {
				return nil, nil, err
			}
			p, err := f.Provider(ctx)
			if err != nil {
				lock.Unlock()
				return nil, nil, err
			}
			return &fleet.Manager{P: p, S: st, Clock: f.Clock(), Log: f.Log}, func() { lock.Unlock() }, nil
		},
		OnLaddered: reporter{f}.laddered, OnReaped: reporter{f}.reaped,
	})
}
