package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/fleet"
)

type destroyOptions struct {
	// IDs are the instances given; empty with --all.
	IDs []int64
	cmdutil.JSONFlags
	All   bool
	Yes   bool
	Fleet string
	// Force destroys even when results on a node were never collected.
	Force   bool
	Collect bool // collect results into ./results first
	Results string
}

// newDestroyCmd parses into destroyOptions and hands them to runF (tests)
// or destroyRun.
func newDestroyCmd(f *factory.Factory, runF func(context.Context, *destroyOptions) error) *cobra.Command {
	opts := &destroyOptions{}
	cmd := &cobra.Command{
		Use:   "destroy ID... | --all",
		Short: "Destroy instances: the only way to stop every charge",
		Long: `Destroy instances and wait until the marketplace's listing no longer shows
them; only then are they marked gone. --all destroys every instance vastfleet
tracks (or of one --fleet); it asks first unless --yes.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.All == (len(args) > 0) {
				return usagef("give instance ids or --all (not both)")
			}
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			opts.IDs = ids
			return run(cmd, f, opts, runF, destroyRun)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "destroy every tracked instance")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask")
	cmd.Flags().StringVar(&opts.Fleet, "fleet", "", "with --all: only this fleet")
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print the destroyed ids as JSON")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "destroy even if a node's results are newer than its last collect")
	cmd.Flags().BoolVar(&opts.Collect, "collect", false, "collect each running node's results into ./results/<fleet>/<node>/ first")
	cmd.Flags().StringVar(&opts.Results, "results", "/workspace/project/results", "the results directory checked on running nodes")
	// Checking results reaches into the instances.
	return withNeeds(f, cmd, func([]string) factory.Needs { return factory.Needs{SimHosts: !opts.Force} })
}

// destroyRun is `destroy` once its flags are parsed.
func destroyRun(ctx context.Context, f *factory.Factory, opts *destroyOptions) error {
	ids := opts.IDs
	m, err := f.Manager(ctx, factory.HolderName(append([]string{"destroy"}, idArgs(ids)...)...))
	if err != nil {
		return err
	}
	req := fleet.DestroyRequest{IDs: ids, All: opts.All, Fleet: opts.Fleet,
		Known:   func(ctx context.Context, ids []int64) error { return knownIDs(ctx, m.S, ids) },
		Confirm: func(n int) bool { return opts.Yes || f.IO.Confirm(fmt.Sprintf("Destroy %d instance(s)?", n)) }}
	if !opts.Force {
		req.Guard = f.ResultsGuard(m.S, opts.Collect, opts.Results)
	}
	ids, err = m.DestroyAsked(ctx, req)
	switch {
	case errors.Is(err, fleet.ErrDeclined):
		return usagef("not confirmed: nothing destroyed (pass --yes to skip the question)")
	case err != nil:
		return err
	case len(ids) == 0:
		fmt.Fprintln(f.IO.ErrOut, "nothing to destroy")
		return nil
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), map[string]any{"action": "destroy", "ids": ids})
	}
	fmt.Fprintf(f.IO.ErrOut, "destroyed %d instance(s); the marketplace no longer lists them\n", len(ids))
	return nil
}

// reconcileOptions is what `reconcile` was asked.
type reconcileOptions struct {
	DestroyOrphans bool
	DestroyForeign bool
	Adopt          bool
	AdoptForeign   bool
	cmdutil.JSONFlags
}

// newReconcileCmd parses into reconcileOptions and hands them to runF
// (tests) or reconcileRun; adopting and destroying together is a usage
// error.
func newReconcileCmd(f *factory.Factory, runF func(context.Context, *reconcileOptions) error) *cobra.Command {
	opts := &reconcileOptions{}
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Match the marketplace's instances to the store: adopt, mark gone, find orphans",
		RunE: func(cmd *cobra.Command, args []string) error {
			if (opts.Adopt || opts.AdoptForeign) && (opts.DestroyOrphans || opts.DestroyForeign) {
				return usagef("--adopt and --destroy-*: pick one")
			}
			return run(cmd, f, opts, runF, reconcileRun)
		},
	}
	cmd.Flags().BoolVar(&opts.DestroyOrphans, "destroy-orphans", false, "destroy instances labelled by this data dir that it has no record of wanting")
	cmd.Flags().BoolVar(&opts.DestroyForeign, "destroy-foreign", false, "also destroy instances labelled by another vastfleet data dir (a lost database, or a colleague's!)")
	cmd.Flags().BoolVar(&opts.Adopt, "adopt", false, "track again the orphans this data dir rented (its state store was lost, emptied or rolled back)")
	cmd.Flags().BoolVar(&opts.AdoptForeign, "adopt-foreign", false, "also take over orphans labelled by another vastfleet data dir")
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	return cmd
}

// reconcileRun is `reconcile` once its flags are parsed.
func reconcileRun(ctx context.Context, f *factory.Factory, opts *reconcileOptions) error {
	m, err := f.Manager(ctx, factory.HolderName("reconcile"))
	if err != nil {
		return err
	}
	ropts := fleet.ReconcileOptions{DestroyOrphans: opts.DestroyOrphans, DestroyForeign: opts.DestroyForeign}
	switch {
	case opts.AdoptForeign:
		ropts.Adopt = func(fleet.Orphan) bool { return true }
	case opts.Adopt:
		ropts.Adopt = f.OwnOrphan
	}
	rep, err := m.Reconcile(ctx, ropts)
	if err != nil {
		return err
	}
	f.WarnOrphans(rep.Orphans)
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), rep)
	}
	fmt.Fprint(f.IO.Out, rep.String())
	return nil
}
