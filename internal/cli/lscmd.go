package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/store"
)

type lsOptions struct {
	Fleet string
	All   bool
	cmdutil.JSONFlags
}

// newLsCmd parses into lsOptions and hands them to runF (tests) or lsRun.
func newLsCmd(f *factory.Factory, runF func(context.Context, *lsOptions) error) *cobra.Command {
	opts := &lsOptions{}
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List instances vastfleet tracks, refreshed from the marketplace",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return lsRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Fleet, "fleet", "", "only this fleet")
	cmd.Flags().BoolVar(&opts.All, "all", false, "include destroyed instances")
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	return cmd
}

// lsRun is `ls` once its flags are parsed.
func lsRun(ctx context.Context, f *factory.Factory, opts *lsOptions) error {
	m, err := f.Observed(ctx)
	if err != nil {
		return err
	}
	recs, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: opts.Fleet, IncludeGone: opts.All})
	if err != nil {
		return err
	}
	views, err := m.InstanceViews(ctx, recs, f.Clock().Now())
	if err != nil {
		return err
	}
	orphans := f.OrphanViews()
	if opts.JSON {
		rows := make([]any, 0, len(views)+len(orphans))
		for _, v := range views {
			rows = append(rows, v)
		}
		for _, o := range orphans {
			rows = append(rows, o)
		}
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), rows)
	}
	if len(views) > 0 || len(orphans) == 0 {
		if err := printInstances(f, views); err != nil {
			return err
		}
	}
	return printOrphans(f.IO.Out, orphans)
}

func printInstances(f *factory.Factory, views []fleet.InstanceView) error {
	if len(views) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "no instances (rent one with `vastfleet rent OFFER_ID` or `vastfleet launch`)")
		return nil
	}
	t := cmdutil.NewTable(f.IO.Out, "ID", "OFFER", "GPU", "vCPU", "$/hr", "STATE", "UPTIME", "COST", "SSH", "FLEET")
	for _, v := range views {
		fleetName := v.Fleet
		if v.Experiment != "" {
			fleetName += "/" + v.Experiment
		}
		t.Row(strconv.FormatInt(v.ID, 10), strconv.FormatInt(v.OfferID, 10), fmt.Sprintf("%s x%d", v.GPUName, v.NumGPUs),
			fmtNum(v.CPUCores), fmt.Sprintf("%.3f", v.DPHTotal), v.ShownState(),
			(time.Duration(v.UptimeSec) * time.Second).Round(time.Minute).String(),
			fmt.Sprintf("$%.3f", v.CostSoFar), dash(v.SSHURL), fleetName)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	for _, v := range views {
		if v.Note != "" {
			fmt.Fprintf(f.IO.Out, "instance %d: %s\n", v.ID, v.Note)
		}
		if v.Next != nil {
			fmt.Fprintf(f.IO.Out, "instance %d: teardown ladder: %s at %s (%s)\n", v.ID, v.Next.Action, v.Next.At.UTC().Format(time.RFC3339), v.Next.Reason)
		}
	}
	return nil
}
