package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	fleets := []string{opts.Fleet}
	if opts.Fleet == "" {
		all, err := m.S.ListFleets(ctx)
		if err != nil {
			return err
		}
		fleets = fleets[:0]
		for _, fl := range all {
			fleets = append(fleets, fl.Name)
		}
	}
	var errs []error
	// The teardown ladder first: it needs no coordinator.
	for _, name := range fleets {
		l, err := fleet.FleetLadder(ctx, m.S, name)
		if err != nil {
			return err
		}
		done, err := m.ApplyLadder(ctx, name, l)
		if err != nil {
			return err
		}
		for _, d := range done {
			f.reportLaddered(name, d)
			if d.Err != nil {
				errs = append(errs, d.Err)
			}
		}
	}
	db, err := f.existingCoordDB(ctx)
	if err != nil {
		return err
	}
	if db == nil {
		fmt.Fprintln(f.io.ErrOut, "no coordinator has run for this data dir: no agent's silence to go by")
		return errors.Join(errs...)
	}
	defer db.Close()
	n := 0
	for _, name := range fleets {
		o, err := reapOptionsFor(ctx, db, name, opts)
		if err != nil {
			return err
		}
		if len(o.LastHeard) == 0 {
			continue
		}
		res, err := m.Reap(ctx, o)
		if err != nil {
			return err
		}
		for _, r := range res {
			n++
			f.reportReaped(name, r)
			if r.Err != nil {
				errs = append(errs, r.Err)
			}
		}
	}
	if n == 0 {
		fmt.Fprintln(f.io.ErrOut, "no silent instances")
	}
	return errors.Join(errs...)
}

// reapOptionsFor is how fleet name is reaped: its launch-time dead-man
// switch, unless the flags say otherwise.
func reapOptionsFor(ctx context.Context, db *coord.DB, name string, opts *reapOptions) (fleet.ReapOptions, error) {
	after, policy, ok, err := db.FleetPolicy(ctx, name)
	if err != nil {
		return fleet.ReapOptions{}, err
	}
	if !ok || opts.AfterSet || after <= 0 {
		after = opts.After
	}
	if !ok || opts.PolicySet || policy == "" {
		policy = opts.Policy
	}
	heard, err := db.LastHeard(ctx, name)
	if err != nil {
		return fleet.ReapOptions{}, err
	}
	return fleet.ReapOptions{Fleet: name, LastHeard: heard, After: after, Policy: policy}, nil
}

func (f *factory) reportLaddered(fleetName string, d fleet.Laddered) {
	verb := map[string]string{fleet.LadderStop: "stopped", fleet.LadderDestroy: "destroyed"}[d.Step.Action]
	if d.Err != nil {
		fmt.Fprintf(f.io.ErrOut, "instance %d (fleet %s): teardown ladder, %s; %s failed: %v\n", d.ID, fleetName, d.Step.Reason, d.Step.Action, d.Err)
		return
	}
	fmt.Fprintf(f.io.Out, "instance %d (fleet %s): teardown ladder, %s: %s\n", d.ID, fleetName, d.Step.Reason, verb)
}

func (f *factory) reportReaped(fleetName string, r fleet.Reaped) {
	verb := map[string]string{fleet.ReapStop: "stopped", fleet.ReapDestroy: "destroyed"}[r.Action]
	if r.Err != nil {
		fmt.Fprintf(f.io.ErrOut, "instance %d (fleet %s): agent silent for %s; %s failed: %v\n", r.ID, fleetName, r.Silent.Round(time.Second), r.Action, r.Err)
		return
	}
	fmt.Fprintf(f.io.Out, "instance %d (fleet %s): agent silent for %s: %s\n", r.ID, fleetName, r.Silent.Round(time.Second), verb)
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
	t := time.NewTicker(max(time.Duration(float64(every)/f.simScale()), time.Second))
	defer t.Stop()
	for {
		// The first pass at once: a coordinator started again after a
		// crash owes the steps that fell due while it was down.
		if err := f.reapPass(ctx, dir, db, after, policy, since); err != nil && ctx.Err() == nil {
			f.log.Warn("reaping silent instances", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (f *factory) reapPass(ctx context.Context, dir string, db *coord.DB, after time.Duration, policy string, since time.Time) error {
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return err
	}
	storeID, err := st.ID(ctx)
	if err != nil {
		return err
	}
	all, err := st.ListFleets(ctx)
	if err != nil {
		return err
	}
	var due []fleet.ReapOptions
	ladders := map[string]fleet.Ladder{}
	look := &fleet.Manager{S: st, Clock: f.Clock(), Log: f.log} // reads only
	for _, fl := range all {
		// The fleet's teardown ladder, due steps only.
		l, err := fleet.FleetLadder(ctx, st, fl.Name)
		if err != nil {
			return err
		}
		steps, err := look.LadderSteps(ctx, fl.Name, l)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(steps, func(s fleet.Laddered) bool { return s.Step.Due(f.Clock().Now()) }) {
			ladders[fl.Name] = l
		}
		// Each fleet as it was launched; the coordinator's flags only
		// for a fleet with no recorded switch.
		o, err := reapOptionsFor(ctx, db, fl.Name, &reapOptions{After: after, Policy: policy})
		if err != nil || len(o.LastHeard) == 0 {
			continue
		}
		o.Since = since
		recs, err := st.Instances(ctx, store.InstanceFilter{Fleet: fl.Name})
		if err != nil {
			return err
		}
		if len(fleet.Abandoned(recs, storeID, o, f.Clock().Now())) > 0 {
			due = append(due, o)
		}
	}
	if len(due) == 0 && len(ladders) == 0 {
		return nil
	}
	lock, err := store.AcquireLock(dir, holderName("coord", "(reaping silent instances)"))
	if err != nil {
		return err // busy: the next pass tries again
	}
	defer lock.Unlock()
	p, err := f.Provider(ctx)
	if err != nil {
		return err
	}
	m := &fleet.Manager{P: p, S: st, Clock: f.Clock(), Log: f.log}
	// What looked due was read from the store, which nobody may have
	// brought up to date since the launch that wrote it died: an instance
	// it last saw loading has run since. Steps are decided again on a
	// fresh listing, or not at all (a destroy on a stale view is worse
	// than a late one).
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return err
	}
	for name, l := range ladders {
		done, err := m.ApplyLadder(ctx, name, l)
		if err != nil {
			return err
		}
		for _, d := range done {
			f.reportLaddered(name, d)
		}
	}
	for _, o := range due {
		res, err := m.Reap(ctx, o)
		if err != nil {
			return err
		}
		for _, r := range res {
			f.reportReaped(o.Fleet, r)
		}
	}
	return nil
}

// deadManMoments reads, from the data dir's coordinator database where
// one exists, when each instance's agent will have stopped or destroyed
// it by its dead-man switch: its last heartbeat there plus its fleet's
// orphan-after (fleet.ReconcileOptions.SelfStops). A reconcile after the
// coordinator was gone for a while (up --resume, down, ls, cost) then
// dates what the agents did at the moment they did it.
func (f *factory) deadManMoments(st *store.Store) func(context.Context) (map[int64]time.Time, error) {
	return func(ctx context.Context) (map[int64]time.Time, error) {
		dir, err := f.dataDir()
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, "coord.db")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, nil // no coordinator ever ran: no agent had a switch armed by one
		}
		db, err := coord.OpenDB(ctx, path)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		fleets, err := st.ListFleets(ctx)
		if err != nil {
			return nil, err
		}
		out := map[int64]time.Time{}
		for _, fl := range fleets {
			after, _, ok, err := db.FleetPolicy(ctx, fl.Name)
			if err != nil {
				return nil, err
			}
			if !ok || after <= 0 {
				continue
			}
			heard, err := db.LastHeard(ctx, fl.Name)
			if err != nil {
				return nil, err
			}
			for id, h := range heard {
				out[id] = fleet.DeadManAt(h, after)
			}
		}
		return out, nil
	}
}
