package cli

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/demo"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/jobfile"
)

type demoOptions struct {
	Count   int
	Prefix  string
	Seconds float64
	Keep    bool
	// By is the task's ranking: vcpu or useful.
	By string
	// CullBelow and CullAfter are the task's cull policy (0: none).
	CullBelow float64
	CullAfter time.Duration
	cmdutil.JSONFlags
	// DataDirGiven and SimSpeedGiven say the user typed --data-dir and
	// --sim-speed: the demo otherwise picks a fresh data dir and its
	// own speed.
	DataDirGiven, SimSpeedGiven bool
}

// newDemoCmd parses into demoOptions and hands them to runF (tests) or
// demoRun; a --prefix that is not hex is a usage error.
func newDemoCmd(f *factory.Factory, runF func(context.Context, *demoOptions) error) *cobra.Command {
	opts := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo [--count 50]",
		Short: "The whole story on the simulated marketplace: rank, launch parked with backfill, run a search, watch, collect, destroy, report",
		Long: `Runs a job on the built-in simulated marketplace, in a fresh data dir (or
--data-dir), with nothing to install: offers ranked by vCPU per $/hr,
--count instances launched parked and released together, failed boots
replaced, the agent on every instance running a real CPU job (searching
for sha256 hashes that start with --prefix) that reports its hash rate
and every hash it finds to the coordinator, whose dashboard link is
printed; then results are collected, every instance destroyed and the
cost report printed. The simulated instances run on this machine; with
--sim-capacity-scale N each node's search runs at its machine's true
cores over that scale (about 120 × --count keeps the fleet within half
a core of this machine's).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := demoUsage(opts); err != nil {
				return err
			}
			opts.DataDirGiven = cmd.Flags().Changed("data-dir")
			opts.SimSpeedGiven = cmd.Flags().Changed("sim-speed")
			return run(cmd, f, opts, runF, demoRun)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.Count, "count", 50, "instances to launch")
	fl.StringVar(&opts.Prefix, "prefix", "0000", "hex prefix the searched hashes start with")
	fl.Float64Var(&opts.Seconds, "seconds", 6, "how long each node searches (wall seconds)")
	fl.Float64Var(&opts.CullBelow, "cull", 0, "cull: destroy a node whose hashes_per_s per $/hr stays under this share of the median (0.5: half), judged after --cull-after (0: no cull)")
	fl.DurationVar(&opts.CullAfter, "cull-after", 3*time.Minute, "with --cull: how long (market time) a node reports before it is judged")
	fl.StringVar(&opts.By, "by", "vcpu", "the task's ranking: vcpu ($/vCPU, cheapest first) or useful (the expected $ of a node ready in time and kept)")
	fl.BoolVar(&opts.Keep, "keep", false, "keep the demo's data dir (its store, results and reports) and print where it is")
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print the cost report as JSON")
	limitFlags(fl, bounds{"count", "1", "200"}, bounds{"seconds", ">0", "3600"}, bounds{"cull", "0", "0.99"}, bounds{"cull-after", "1m", "24h"})
	f.Declare(cmd, func(args []string) (factory.Needs, error) { return demoNeeds(f, cmd, opts) })
	return cmd
}

// demoSpeed is the demo's market speed unless --sim-speed is given: a
// simulated minute per 1.5 s (API calls take wall time, and boots must
// fit the deadline).
const demoSpeed = 40

// demoUsage refuses a --by or --prefix the demo cannot run.
func demoUsage(opts *demoOptions) error {
	if opts.By != "vcpu" && opts.By != "useful" {
		return usagef("--by %q: want vcpu or useful", opts.By)
	}
	if !demo.ValidPrefix(opts.Prefix) {
		return usagef("--prefix %q: want up to 16 hex digits", opts.Prefix)
	}
	return nil
}

// demoNeeds: the demo is an up, at its own speed and, unless --data-dir
// is given, in a data dir it makes, whose paths its output leaves out
// when that dir goes at the end (demo.Streams). A demo that will not run
// (its flags refused, another market) makes none.
func demoNeeds(f *factory.Factory, cmd *cobra.Command, opts *demoOptions) (factory.Needs, error) {
	n := upNeeds(nil)
	n.SimSpeed = demoSpeed
	if demoUsage(opts) != nil || f.Opts.Market != "sim" || cmd.Flags().Changed("data-dir") {
		return n, nil
	}
	dir, err := demo.NewDataDir()
	if err != nil {
		return n, err
	}
	n.DataDir = dir
	if o := opts.demo(false); o.Scratch() {
		n.Out, n.ErrOut = demo.Streams(f.IO.Out, f.IO.ErrOut, f.IO.ErrTTY, dir, o)
	}
	return n, nil
}

// demo is what the demo was asked, dataDirGiven saying the user named
// its data dir.
func (opts *demoOptions) demo(dataDirGiven bool) demo.Options {
	return demo.Options{Count: opts.Count, Prefix: opts.Prefix, Seconds: opts.Seconds, By: opts.By, Keep: opts.Keep,
		JSON: opts.JSON, DataDirGiven: dataDirGiven, CullBelow: opts.CullBelow, CullAfter: opts.CullAfter}
}

// demoRun is `demo` once its flags are parsed.
func demoRun(ctx context.Context, f *factory.Factory, opts *demoOptions) error {
	if f.Opts.Market != "sim" {
		return usagef("the demo runs on the simulated marketplace only (drop --market %s)", f.Opts.Market)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	d := &demo.Deps{Out: f.IO.Out, ErrOut: f.IO.ErrOut, Self: self, Close: func() { f.Close() }, DataDir: f.DataDir,
		Up: func(ctx context.Context, jf *jobfile.Job, file, results string) (*job.Report, error) {
			uo := &upOptions{CoordAddr: "127.0.0.1:0", ResultsDir: results, OnInterrupt: job.Collect, JSONFlags: opts.JSONFlags, poll: 250 * time.Millisecond}
			return upRun(ctx, f, uo, jf, file)
		},
		Print: func(rep *job.Report) error {
			if !opts.JSON {
				return nil
			}
			return cmdutil.WriteJSON(opts.Out(f.IO.Out), rep)
		}}
	return demo.Run(ctx, d, opts.demo(opts.DataDirGiven))
}

// newHashcheckCmd is the demo's verify command: the coordinator runs it on
// each finding (its JSON on stdin), which it accepts only when the hash is
// the input's sha256 and starts with --prefix, so a node cannot report
// hashes it did not find.
func newHashcheckCmd(f *factory.Factory) *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:    "hashcheck --prefix HEX < finding.json",
		Short:  "The demo's verify command: re-hash a finding",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return demo.Hashcheck(f.IO.In, prefix)
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "hex prefix every hash must start with")
	return cmd
}

// newHashworkCmd is the demo's CPU job: sha256 of "<node>-<n>" for n = 0,
// 1, ... until --seconds pass, printing the hash rate as a metric line
// and every hash that starts with --prefix as a finding (and into
// results/found.txt).
func newHashworkCmd(f *factory.Factory, runF func(context.Context, *hashworkOptions) error) *cobra.Command {
	opts := &hashworkOptions{}
	cmd := &cobra.Command{
		Use:    "hashwork --prefix HEX --seconds S",
		Short:  "The demo's CPU job: search sha256 hashes with a prefix",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, f, opts, runF, hashworkRun)
		},
	}
	cmd.Flags().StringVar(&opts.Prefix, "prefix", "000", "hex prefix")
	cmd.Flags().Float64Var(&opts.Seconds, "seconds", 5, "how long to search")
	limitFlags(cmd.Flags(), bounds{"seconds", ">0", "86400"})
	return cmd
}

// hashworkOptions is what `hashwork` was asked.
type hashworkOptions struct {
	Prefix  string
	Seconds float64
}

// hashworkRun is `hashwork` once its flags are parsed.
func hashworkRun(ctx context.Context, f *factory.Factory, opts *hashworkOptions) error {
	return demo.Hashwork(ctx, f.IO.Out, opts.Prefix, opts.Seconds)
}
