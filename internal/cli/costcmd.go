package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/bill"
	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/fleet"
)

// costOptions is what `cost` was asked.
type costOptions struct {
	Fleet string
	// Job is a job's name: its instances are its fleet's.
	Job string
	// Reconcile holds the ledger up against the marketplace's charges.
	Reconcile bool
	cmdutil.JSONFlags
}

// newCostCmd parses into costOptions and hands them to runF (tests) or
// costRun.
func newCostCmd(f *factory.Factory, runF func(context.Context, *costOptions) error) *cobra.Command {
	opts := &costOptions{}
	cmd := &cobra.Command{
		Use:   "cost",
		Short: "What instances cost: per instance and per fleet, actual against estimate",
		Long: `Cost per instance and per fleet: running time × compute $/hr plus storage for
every second the instance existed (stopped included) plus bandwidth, against
the estimate recorded when it was planned or launched.

Bandwidth is what the marketplace reports it billed (inet_down_billed and
inet_up_billed at the host's prices) as of the last listing; an instance it
never reported for is priced at its estimated image pull, marked with "~".

--reconcile reads the marketplace's own charges (every page, instance charges
per day) and shows them line by line beside this ledger, per instance and
kind, with the difference and what explains it: rounding (under a cent), a
stretch one side billed and the other did not, a rate change, bandwidth that
is an estimate or lags, or a charge for an instance this data dir does not
know (shown without --fleet/--job). A charges answer that cannot be read
whole is an error, never $0.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Job != "" && opts.Fleet != "" {
				return usagef("--fleet and --job both name the instances: give one")
			}
			if opts.Job != "" && !opts.Reconcile {
				opts.Fleet = opts.Job
			}
			return run(cmd, f, opts, runF, costRun)
		},
	}
	cmd.Flags().StringVar(&opts.Fleet, "fleet", "", "only this fleet")
	cmd.Flags().StringVar(&opts.Job, "job", "", "only this job's instances")
	cmd.Flags().BoolVar(&opts.Reconcile, "reconcile", false, "compare with the marketplace's charges, line by line")
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON (with --reconcile: instances with their lines, and total)")
	return cmd
}

// costRun is `cost` once its flags are parsed.
func costRun(ctx context.Context, f *factory.Factory, opts *costOptions) error {
	m, err := f.Observed(ctx)
	if err != nil {
		return err
	}
	if opts.Reconcile {
		return reconcileCostRun(ctx, f, m, opts)
	}
	rep, err := m.Cost(ctx, opts.Fleet)
	if err != nil {
		return err
	}
	c := bill.CostWithOrphans{CostReport: rep, Orphans: f.OrphanViews()}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), c)
	}
	return c.WriteText(f.IO.Out)
}

// reconcileCostRun is `cost --reconcile`.
func reconcileCostRun(ctx context.Context, f *factory.Factory, m *fleet.Manager, opts *costOptions) error {
	if !f.FrozenAt().IsZero() {
		return fmt.Errorf("cost --reconcile needs the marketplace, and another process holds the simulated market without serving it")
	}
	scope := opts.Fleet
	if opts.Job != "" {
		scope = opts.Job
	}
	rep, err := bill.Reconcile(ctx, m, scope)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), rep)
	}
	return cmdutil.WriteTable(f.IO.Out, bill.ReconcileColumns, rep.Rows())
}

// exportOptions is what `export` was asked.
type exportOptions struct {
	Format string
	// Out is the file written ("" or - for stdout).
	Out string
	// All includes destroyed instances (vast-instances).
	All    bool
	Fleet  string
	Mpich  bool
	Script string
	// IDs are the instances given (formats other than vast-instances).
	IDs []string
}

// exportFormats are what --format takes.
var exportFormats = []string{"vast-instances", "ssh-config", "hostfile", "env", "torchrun"}

// newExportCmd parses into exportOptions and hands them to runF (tests) or
// exportRun; an unknown --format is a usage error.
func newExportCmd(f *factory.Factory, runF func(context.Context, *exportOptions) error) *cobra.Command {
	opts := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export --format vast-instances|ssh-config|hostfile|env|torchrun [--fleet F | ID...] [--mpich] [--out FILE]",
		Short: "Write the tracked instances as vast-instances.json, or a fleet as ssh config, MPI hostfile, rank env or torchrun lines",
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(exportFormats, opts.Format) {
				return usagef("--format %q: use vast-instances, ssh-config, hostfile, env or torchrun", opts.Format)
			}
			opts.IDs = args
			return run(cmd, f, opts, runF, exportRun)
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "vast-instances", "output format")
	cmd.Flags().StringVar(&opts.Out, "out", "", "write to FILE instead of stdout")
	cmd.Flags().BoolVar(&opts.All, "all", false, "include destroyed instances")
	cmd.Flags().StringVar(&opts.Fleet, "fleet", "", "the fleet to export (formats other than vast-instances)")
	cmd.Flags().BoolVar(&opts.Mpich, "mpich", false, "hostfile in MPICH's host:N form instead of Open MPI's host slots=N")
	cmd.Flags().StringVar(&opts.Script, "script", "train.py", "the training script torchrun lines run")
	return cmd
}

// exportRun is `export` once its flags are parsed.
func exportRun(ctx context.Context, f *factory.Factory, opts *exportOptions) error {
	out := opts.Out
	if opts.Format != "vast-instances" {
		if out == "" || out == "-" {
			return exportNodes(ctx, f, f.IO.Out, opts.Format, opts.Fleet, opts.IDs, opts.Mpich, opts.Script)
		}
		var b bytes.Buffer
		if err := exportNodes(ctx, f, &b, opts.Format, opts.Fleet, opts.IDs, opts.Mpich, opts.Script); err != nil {
			return err
		}
		return atomicfile.WriteFile(out, b.Bytes(), 0o600)
	}
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return err
	}
	if out == "" || out == "-" {
		return st.ExportVastInstances(ctx, f.IO.Out, opts.All)
	}
	return atomicfile.Write(out, 0o600, func(w io.Writer) error {
		return st.ExportVastInstances(ctx, w, opts.All)
	})
}

// importOptions is what `import` was asked.
type importOptions struct {
	Format string
	File   string
}

// newImportCmd parses into importOptions and hands them to runF (tests) or
// importRun; a --format other than vast-instances is a usage error.
func newImportCmd(f *factory.Factory, runF func(context.Context, *importOptions) error) *cobra.Command {
	opts := &importOptions{}
	cmd := &cobra.Command{
		Use:   "import [--format vast-instances] FILE",
		Short: "Read a vast-instances.json state file into the store (all or nothing)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Format != "vast-instances" {
				return usagef("--format %q: the supported format is vast-instances", opts.Format)
			}
			opts.File = args[0]
			return run(cmd, f, opts, runF, importRun)
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "vast-instances", "input format")
	return cmd
}

// importRun is `import` once its flags are parsed.
func importRun(ctx context.Context, f *factory.Factory, opts *importOptions) error {
	n, err := f.ImportVastInstances(ctx, opts.File)
	if err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "imported %d instance(s) from %s; run `vastfleet reconcile` to refresh them from the marketplace\n", n, opts.File)
	return nil
}
