package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/scalebench"
)

// benchScaleOptions is what `bench scale` was asked.
type benchScaleOptions struct {
	Config     scalebench.Config
	SyncMB     float64
	MemFloorMB float64
	JSONFlags
}

// newBenchScaleCmd parses into benchScaleOptions and hands them to runF
// (tests) or benchScaleRun.
func newBenchScaleCmd(f *factory, runF func(context.Context, *benchScaleOptions) error) *cobra.Command {
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
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return benchScaleRun(cmd.Context(), f, opts)
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
	addJSONFlags(fl, &opts.JSONFlags, "print one JSON line per phase, the summary last")
	return cmd
}

// benchScaleRun runs the benchmark with this binary and prints each phase
// as it ends, then the summary.
func benchScaleRun(ctx context.Context, f *factory, opts *benchScaleOptions) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cfg := opts.Config
	cfg.Bin = self
	cfg.Log = f.io.ErrOut
	var enc *json.Encoder
	if opts.JSON {
		enc = json.NewEncoder(opts.out(f.io.Out))
	}
	var printErr error
	cfg.OnPhase = func(p scalebench.Phase) {
		if enc != nil {
			printErr = firstErr(printErr, enc.Encode(p))
			return
		}
		printErr = firstErr(printErr, printScalePhase(f, p))
	}
	rep, err := scalebench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if printErr != nil {
		return printErr
	}
	s := rep.Summary
	if enc != nil {
		if err := enc.Encode(s); err != nil {
			return err
		}
	} else if err := printScaleSummary(f, s); err != nil {
		return err
	}
	if !s.Complete() {
		return partialError{fmt.Errorf("bench scale: %s", s.Failed)}
	}
	return nil
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// printScalePhase is one phase: a line, then a row per process.
func printScalePhase(f *factory, p scalebench.Phase) error {
	head := fmt.Sprintf("%s: %d of %d nodes, %.1f s", p.Phase, p.OK, p.Nodes, p.WallS)
	switch {
	case p.Skipped:
		head = fmt.Sprintf("%s: skipped (%s)", p.Phase, p.Note)
	case p.Note != "":
		head += " (" + p.Note + ")"
	}
	if p.MemAvailableMinMB != nil {
		head += fmt.Sprintf("; available memory at least %.0f MB", *p.MemAvailableMinMB)
	}
	fmt.Fprintln(f.io.Out, head)
	if p.Error != "" {
		fmt.Fprintf(f.io.Out, "  error: %s\n", termSafe(p.Error))
	}
	if p.Command != "" && !p.Skipped {
		fmt.Fprintf(f.io.Out, "  %s\n", termSafe(p.Command))
	}
	if p.Skipped {
		return nil
	}
	t := newTable(f.io.Out, "PROCESS", "CPU S", "PEAK RSS MB", "PEAK FDS", "PROCS")
	for _, u := range p.Usage {
		t.row(u.Process, numOrNA(u.CPUS, 2), numOrNA(u.PeakRSSMB, 1), intOrNA(u.PeakFDs), intOrBlank(u.Procs))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(f.io.Out)
	return nil
}

// printScaleSummary is the whole run: what each phase reached, and each
// process's CPU over the run and peaks.
func printScaleSummary(f *factory, s scalebench.Summary) error {
	fmt.Fprintf(f.io.Out, "%d nodes: %d ready, job done on %d (%d findings), exec on %d, sync to %d, collect from %d, %d destroyed; %.1f s in all (%.1f s to start the market and coordinator)\n",
		s.Nodes, s.Ready, s.JobOK, s.Findings, s.ExecOK, s.SyncOK, s.CollectOK, s.Destroyed, s.WallS, s.SetupS)
	if s.SyncLastS > 0 && s.SyncLinkS > 0 {
		fmt.Fprintf(f.io.Out, "sync: the last node held the tree after %.1fs, %.1fx the %.1fs its archive takes over the slowest listed downlink\n", s.SyncLastS, s.SyncLastS/s.SyncLinkS, s.SyncLinkS)
	}
	if s.ExecSpeedup > 0 {
		fmt.Fprintf(f.io.Out, "exec -- true was %.1fx faster than the system ssh run 32 at a time (%d nodes reached)\n", s.ExecSpeedup, s.SSHOK)
	}
	if s.Failed != "" {
		fmt.Fprintf(f.io.Out, "first shortfall: %s\n", termSafe(s.Failed))
	}
	t := newTable(f.io.Out, "PROCESS", "CPU S", "PEAK RSS MB", "PEAK FDS", "PROCS")
	t.row("vastfleet (commands)", ff(s.CPUS, 1), ff(s.PeakRSSMB, 1), strconv.Itoa(s.PeakFDs), "")
	t.row("coord", ff(s.CoordCPUS, 1), ff(s.CoordPeakRSSMB, 1), strconv.Itoa(s.CoordPeakFDs), "")
	t.row("sim", ff(s.SimCPUS, 1), ff(s.SimPeakRSSMB, 1), strconv.Itoa(s.SimPeakFDs), "")
	t.row("hosts", ff(s.HostsCPUS, 1), ff(s.HostsPeakRSSMB, 1), "", strconv.Itoa(s.HostsPeakProcs))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(f.io.Out, "after destroy: the simulator holds %.1f MB, %d of its machines' processes left", s.SimRSSAfterMB, s.HostsLeft)
	if s.FDLimit > 0 {
		fmt.Fprintf(f.io.Out, "; open-file limit %d", s.FDLimit)
	}
	fmt.Fprintln(f.io.Out)
	return nil
}

func ff(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

func numOrNA(v *float64, prec int) string {
	if v == nil {
		return "n/a"
	}
	return ff(*v, prec)
}

func intOrNA(v *int) string {
	if v == nil {
		return "n/a"
	}
	return strconv.Itoa(*v)
}

func intOrBlank(v *int) string {
	if v == nil {
		return ""
	}
	return strconv.Itoa(*v)
}
