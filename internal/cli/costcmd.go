package cli

import (
	"bytes"
	"fmt"
	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/fleet"
)

func newCostCmd(f *factory) *cobra.Command {
	var fleetName string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cost",
		Short: "What instances cost: per instance and per fleet, actual against estimate",
		Long: `Cost per instance and per fleet: running time × compute $/hr plus storage for
every second the instance existed (stopped included) plus bandwidth, against
the estimate recorded when it was planned or launched.

Bandwidth is what the marketplace reports it billed (inet_down_billed and
inet_up_billed at the host's prices) as of the last listing; an instance it
never reported for is priced at its estimated image pull, marked with "~".`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			m, err := f.observed(ctx)
			if err != nil {
				return err
			}
			rep, err := m.Cost(ctx, fleetName)
			if err != nil {
				return err
			}
			orphans := f.orphanViews(f.orphans)
			if asJSON {
				return writeJSON(f.io.Out, struct {
					fleet.CostReport
					Orphans []orphanJSON `json:"orphans"`
				}{rep, orphans})
			}
			if err := printCost(f.io.Out, rep); err != nil {
				return err
			}
			return printOrphans(f.io.Out, orphans)
		},
	}
	cmd.Flags().StringVar(&fleetName, "fleet", "", "only this fleet")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printCost(w io.Writer, rep fleet.CostReport) error {
	t := newTable(w, "INSTANCE", "FLEET", "RUNNING", "EXISTED", "COMPUTE", "STORAGE", "BANDWIDTH", "TOTAL", "ESTIMATE")
	for _, c := range rep.Instances {
		bw := money(c.Bandwidth)
		if c.BandwidthEstimated {
			bw = "~" + bw
		}
		t.row(strconv.FormatInt(c.InstanceID, 10), c.Fleet, c.Running.Round(1e9).String(), c.Existed.Round(1e9).String(),
			money(c.Compute), money(c.Storage), bw, money(c.Total), optMoney(c.Estimated))
	}
	for _, fl := range rep.Fleets {
		t.row("FLEET", fl.Fleet, "", "", money(fl.Compute), money(fl.Storage), money(fl.Bandwidth), money(fl.Total), optMoney(fl.Estimated))
	}
	t.row("TOTAL", "", "", "", money(rep.Compute), money(rep.Storage), money(rep.Bandwidth), money(rep.Total), optMoney(rep.Estimated))
	return t.flush()
}

func money(v float64) string { return fmt.Sprintf("$%.2f", v) }

func optMoney(v *float64) string {
	if v == nil {
		return "-"
	}
	return money(*v)
}

func newExportCmd(f *factory) *cobra.Command {
	var format, out, fleetName, script string
	var includeGone, mpich bool
	cmd := &cobra.Command{
		Use:   "export --format vast-instances|ssh-config|hostfile|env|torchrun [--fleet F | ID...] [--mpich] [--out FILE]",
		Short: "Write the tracked instances as vast-instances.json, or a fleet as ssh config, MPI hostfile, rank env or torchrun lines",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if format != "vast-instances" {
				if out == "" || out == "-" {
					return exportNodes(ctx, f, f.io.Out, format, fleetName, args, mpich, script)
				}
				var b bytes.Buffer
				if err := exportNodes(ctx, f, &b, format, fleetName, args, mpich, script); err != nil {
					return err
				}
				return atomicfile.WriteFile(out, b.Bytes(), 0o600)
			}
			st, err := f.Store(ctx, false, "")
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				return st.ExportVastInstances(ctx, f.io.Out, includeGone)
			}
			return atomicfile.Write(out, 0o600, func(w io.Writer) error {
				return st.ExportVastInstances(ctx, w, includeGone)
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "vast-instances", "output format")
	cmd.Flags().StringVar(&out, "out", "", "write to FILE instead of stdout")
	cmd.Flags().BoolVar(&includeGone, "all", false, "include destroyed instances")
	cmd.Flags().StringVar(&fleetName, "fleet", "", "the fleet to export (formats other than vast-instances)")
	cmd.Flags().BoolVar(&mpich, "mpich", false, "hostfile in MPICH's host:N form instead of Open MPI's host slots=N")
	cmd.Flags().StringVar(&script, "script", "train.py", "the training script torchrun lines run")
	return cmd
}

func newImportCmd(f *factory) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "import [--format vast-instances] FILE",
		Short: "Read a vast-instances.json state file into the store (all or nothing)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "vast-instances" {
				return usagef("--format %q: the supported format is vast-instances", format)
			}
			ctx := cmd.Context()
			fh, err := os.Open(args[0])
			if err != nil {
				return usageError{err}
			}
			defer fh.Close()
			st, err := f.Store(ctx, true, holderName("import", args[0]))
			if err != nil {
				return err
			}
			n, err := st.ImportVastInstances(ctx, fh, f.Clock().Now())
			if err != nil {
				return usagef("%s: %v (nothing was imported)", args[0], err)
			}
			fmt.Fprintf(f.io.ErrOut, "imported %d instance(s) from %s; run `vastfleet reconcile` to refresh them from the marketplace\n", n, args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "vast-instances", "input format")
	return cmd
}
