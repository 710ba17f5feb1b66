package cli

import (
	"context"

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
			return run(cmd, f, opts, runF, lsRun)
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
	l := fleet.Listing{Instances: views, Orphans: f.OrphanViews()}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), l.Rows())
	}
	return l.WriteText(f.IO.Out, f.IO.ErrOut)
}
