package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/launch/launchbench"
	"github.com/vastfleet/vastfleet/internal/store"
)

// cleanupOptions is what `cleanup` was asked.
type cleanupOptions struct {
	Fleet string
	cmdutil.JSONFlags
}

// newCleanupCmd parses into cleanupOptions and hands them to runF (tests)
// or cleanupRun.
func newCleanupCmd(f *factory.Factory, runF func(context.Context, *cleanupOptions) error) *cobra.Command {
	opts := &cleanupOptions{}
	cmd := &cobra.Command{
		Use:   "cleanup FLEET",
		Short: "Destroy every instance of a fleet that is not running",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Fleet = args[0]
			return run(cmd, f, opts, runF, cleanupRun)
		},
	}
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print the fleet and the destroyed instance ids as JSON")
	return cmd
}

// cleanupRun is `cleanup` once its arguments are parsed.
func cleanupRun(ctx context.Context, f *factory.Factory, opts *cleanupOptions) error {
	m, err := f.Manager(ctx, factory.HolderName("cleanup", opts.Fleet))
	if err != nil {
		return err
	}
	ids, err := launch.Cleanup(ctx, m, opts.Fleet)
	if err != nil {
		return err
	}
	if opts.JSON {
		// The keys of `destroy --json`, and the fleet.
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), map[string]any{"action": "destroy", "fleet": opts.Fleet, "ids": append([]int64{}, ids...)})
	}
	fmt.Fprintf(f.IO.ErrOut, "destroyed %d instance(s) of fleet %s that were not running\n", len(ids), opts.Fleet)
	return nil
}

// hostsOptions is what `hosts` was asked.
type hostsOptions struct {
	Clear bool
	// MachineIDs are the machines --clear forgets (all when empty).
	MachineIDs []int64
	cmdutil.JSONFlags
}

// newHostsCmd parses into hostsOptions and hands them to runF (tests) or
// hostsRun; machine ids without --clear are a usage error.
func newHostsCmd(f *factory.Factory, runF func(context.Context, *hostsOptions) error) *cobra.Command {
	opts := &hostsOptions{}
	cmd := &cobra.Command{
		Use:   "hosts [--clear [MACHINE_ID...]]",
		Short: "Machines that failed to boot, stalled or went offline, skipped by launches for a while",
		RunE: func(cmd *cobra.Command, args []string) error {
			var ids []int64
			for _, a := range args {
				id, err := strconv.ParseInt(a, 10, 64)
				if err != nil || id <= 0 {
					return usagef("machine id %q: want a positive number (see `vastfleet hosts`)", a)
				}
				ids = append(ids, id)
			}
			if len(ids) > 0 && !opts.Clear {
				return usagef("machine ids are for --clear")
			}
			opts.MachineIDs = ids
			return run(cmd, f, opts, runF, hostsRun)
		},
	}
	cmd.Flags().BoolVar(&opts.Clear, "clear", false, "forget the given machines (all when none are given)")
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	return cmd
}

// hostsRun is `hosts` once its flags are parsed.
func hostsRun(ctx context.Context, f *factory.Factory, opts *hostsOptions) error {
	st, err := f.Store(ctx, opts.Clear, factory.HolderName("hosts", "--clear"))
	if err != nil {
		return err
	}
	if opts.Clear {
		if err := st.ClearBadHosts(ctx, opts.MachineIDs...); err != nil {
			return err
		}
		fmt.Fprintln(f.IO.ErrOut, "cleared")
		return nil
	}
	hs, err := f.BadHosts(ctx, st)
	if err != nil {
		return err
	}
	return cmdutil.PrintRows(f.IO.Out, opts.JSONFlags, hs, []string{"MACHINE", "REASON", "FAILED", "SKIPPED UNTIL"},
		func(h store.BadHost) []string {
			return []string{strconv.FormatInt(h.MachineID, 10), h.Reason, h.FailedAt.UTC().Format(time.RFC3339), h.Until.UTC().Format(time.RFC3339)}
		})
}

// benchLaunchOptions is what `bench launch` was asked.
type benchLaunchOptions struct {
	Config   launchbench.Config
	Profiles []string
	cmdutil.JSONFlags
}

// newBenchCmd is `bench` with launch, rank and scale; launch and rank parse
// into their options and hand them to launchF or rankF (tests), or run them.
func newBenchCmd(f *factory.Factory, launchF func(context.Context, *benchLaunchOptions) error, rankF func(context.Context, *benchRankOptions) error) *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Benchmarks on the simulated marketplace"}
	opts := &benchLaunchOptions{}
	cfg := &opts.Config
	bl := &cobra.Command{
		Use:   "launch",
		Short: "Compare launch strategies on one simulated market: start all, manual park, vastfleet",
		Long: `Run the same simulated market under three strategies: start all and wait;
start all, park, release (the manual recipe); and park + backfill + quorum
(vastfleet), once per fault profile (--profile: the simulator's realistic and
harsh profiles by default; "bench" is 30% of hosts slow past 10 minutes, 10%
never boot, offers taken mid-launch). Runs on a virtual clock: seconds, not
minutes.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Count < 1 || cfg.Count > launch.MaxCount {
				return usagef("--count %d: must be 1..%d", cfg.Count, launch.MaxCount)
			}
			return run(cmd, f, opts, launchF, benchLaunchRun)
		},
	}
	bl.Flags().IntVar(&cfg.Count, "count", 300, "instances each strategy asks for")
	bl.Flags().DurationVar(&cfg.Deadline, "deadline", 10*time.Minute, "launch deadline")
	bl.Flags().Int64Var(&cfg.Seed, "seed", 1, "market seed")
	bl.Flags().StringSliceVar(&opts.Profiles, "profile", []string{"realistic", "harsh"}, "fault profiles to run, in order: none, realistic, harsh, bench")
	limitFlags(bl.Flags(), bounds{"count", "1", strconv.Itoa(launch.MaxCount)}, bounds{"deadline", "0", "720h"})
	cmdutil.AddJSONFlags(bl.Flags(), &opts.JSONFlags, "print JSON")
	cmd.AddCommand(bl, newBenchRankCmd(f, rankF), newBenchScaleCmd(f, nil), newBenchOffersCmd(f, nil))
	return cmd
}

// benchLaunchRun is `bench launch` once its flags are parsed.
func benchLaunchRun(ctx context.Context, f *factory.Factory, opts *benchLaunchOptions) error {
	rows, err := launchbench.RunProfiles(ctx, opts.Config, opts.Profiles)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), rows)
	}
	fmt.Fprint(f.IO.Out, launchbench.Table(rows))
	return nil
}
