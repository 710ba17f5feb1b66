package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/scalebench"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// benchScaleOptions is what `bench scale` was asked.
type benchScaleOptions struct {
	Config     scalebench.Config
	SyncMB     float64
	MemFloorMB float64
	cmdutil.JSONFlags
}

// newBenchScaleCmd parses into benchScaleOptions and hands them to runF
// (tests) or benchScaleRun.
func newBenchScaleCmd(f *factory.Factory, runF func(context.Context, *benchScaleOptions) error) *cobra.Command {
	opts := &benchScaleOptions{}
	cfg := &opts.Config
	cmd := &cobra.Command{
		Use:   "scale [--nodes N] [QUERY...]",
		Short: "A fleet of N through every phase of a job, each command a process: time, CPU, memory, open files",
		Long: `Serve a simulated market with machines behind its instances (sim serve) and a
coordinator (coord), then run a job's phases with this vastfleet binary, each
command its own process as a user runs it (global flags --api-url, --data-dir
and --server local, a data dir of its own):

  launch   launch --coord auto --count N: the agent on every node runs a short CPU
           job (--work loop iterations) that reports a metric and a finding
  job      until the coordinator holds every node's metric and finding
  exec     exec --fleet scale -- true
  ssh      the same true with the system ssh, 32 at a time (pdsh's fan-out),
           through export --format ssh-config: exec's yardstick, side by side
  sync     sync TREE --fleet scale (--sync-mb in --sync-files random files)
  collect  collect --fleet scale (each node's results file)
  destroy  destroy --all --fleet scale
  report   cost --fleet scale

For each phase: its wall time and nodes reached; for the command, the
coordinator, the simulator and the simulated machines' processes together:
CPU seconds, peak resident memory (MB, 10^6 bytes) and peak open files.
Open files and the long-lived processes' figures are read from /proc (Linux;
n/a elsewhere). Agents beat every --heartbeat of wall time whatever the
market's --time-scale. A phase is interrupted (as Ctrl+C) past
--phase-timeout, or when this computer's available memory falls under
--mem-floor-mb; the fleet is destroyed whatever happened. With --json, one
line per phase and the summary last.`,
		Example: `  vastfleet bench scale --nodes 300
  vastfleet bench scale --nodes 1000 --json --jq 'select(.event == "summary")'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Nodes < 1 || cfg.Nodes > launch.MaxCount {
				return usagef("--nodes %d: launch rents at most %d (launch.MaxCount)", cfg.Nodes, launch.MaxCount)
			}
			cfg.Query = args
			cfg.SyncBytes = int64(opts.SyncMB * 1e6)
			cfg.MemFloor = int64(opts.MemFloorMB * 1e6)
			if cfg.SyncBytes < int64(cfg.SyncFiles) {
				return usagef("--sync-mb %g in %d files: at least one byte a file", opts.SyncMB, cfg.SyncFiles)
			}
			return run(cmd, f, opts, runF, benchScaleRun)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&cfg.Nodes, "nodes", scalebench.DefaultNodes, "the fleet's size")
	fl.Int64Var(&cfg.Seed, "seed", 1, "market seed")
	fl.StringVar(&cfg.Faults, "faults", "none", "the simulator's fault profile: none, realistic or harsh")
	fl.Float64Var(&cfg.TimeScale, "time-scale", scalebench.DefaultTimeScale, "the market's simulated seconds per wall second")
	fl.DurationVar(&cfg.Deadline, "deadline", scalebench.DefaultDeadline, "the launch's deadline (market time)")
	fl.DurationVar(&cfg.Heartbeat, "heartbeat", scalebench.DefaultHeartbeat, "the agents' heartbeat interval (wall time)")
	fl.DurationVar(&cfg.ProbeTimeout, "probe-timeout", scalebench.DefaultProbeTimeout, "bound each agent's boot probe (wall time): the machines share this computer's CPUs")
	fl.IntVar(&cfg.Work, "work", scalebench.DefaultWork, "loop iterations of each node's CPU job")
	fl.Float64Var(&opts.SyncMB, "sync-mb", float64(scalebench.DefaultSyncBytes)/1e6, "size of the tree synced to every node (MB)")
	fl.BoolVar(&cfg.Links, "links", true, "pace each simulated machine's SSH traffic at its offer's inet_down and inet_up (sim serve --links), so sync's time to the last node means something")
	fl.IntVar(&cfg.SyncFiles, "sync-files", scalebench.DefaultSyncFiles, "files in the synced tree")
	fl.DurationVar(&cfg.PhaseTimeout, "phase-timeout", scalebench.DefaultPhaseTimeout, "interrupt a phase after this long (wall time)")
	fl.Float64Var(&opts.MemFloorMB, "mem-floor-mb", float64(scalebench.DefaultMemFloor)/1e6, "interrupt the phase under way when available memory falls below this (Linux; 0: never)")
	fl.StringVar(&cfg.Dir, "keep", "", "keep the data dir, logs and collected results in `DIR` (default: a temporary directory, removed)")
	limitFlags(fl, bounds{"nodes", "1", strconv.Itoa(launch.MaxCount)}, bounds{"time-scale", ">0", "100000"},
		bounds{"deadline", "1m", "8760h"}, bounds{"heartbeat", "100ms", "1h"}, bounds{"probe-timeout", "1s", "24h"}, bounds{"work", "1", "1000000000"},
		bounds{"sync-mb", ">0", "100000"}, bounds{"sync-files", "1", "100000"}, bounds{"phase-timeout", "1s", "720h"},
		bounds{"mem-floor-mb", "0", "10000000"})
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print one JSON line per phase, the summary last")
	return cmd
}

// benchScaleRun runs the benchmark with this binary and prints each phase
// as it ends, then the summary.
func benchScaleRun(ctx context.Context, f *factory.Factory, opts *benchScaleOptions) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cfg := opts.Config
	cfg.Bin = self
	cfg.Log = f.IO.ErrOut
	pr := scalebench.NewPrinter(f.IO.Out, opts.Stream(f.IO.Out))
	cfg.OnPhase = pr.Phase
	rep, err := scalebench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	s := rep.Summary
	if err := pr.Summary(s); err != nil {
		return err
	}
	if !s.Complete() {
		return usage.Partial{Err: fmt.Errorf("bench scale: %s", s.Failed)}
	}
	return nil
}
