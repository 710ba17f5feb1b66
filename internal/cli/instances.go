package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/nodes"
	"github.com/vastfleet/vastfleet/internal/store"
)

func instanceCommands(f *factory.Factory) []*cobra.Command {
	return []*cobra.Command{
		newRentCmd(f, nil), newLsCmd(f, nil),
		newStateCmd(f, "stop", "Stop instances (storage keeps billing; only destroy ends all charges)", nil),
		newStateCmd(f, "start", "Start stopped instances again", nil),
		newDestroyCmd(f, nil), newReconcileCmd(f, nil), newCostCmd(f, nil), newExportCmd(f, nil), newImportCmd(f, nil),
		newLaunchCmd(f, nil), newCleanupCmd(f, nil), newHostsCmd(f, nil), newLogsCmd(f, nil), newSSHURLCmd(f, nil), newSCPURLCmd(f, nil), newBalanceCmd(f, nil),
		newSSHCmd(f, nil), newExecCmd(f, nil), newSyncCmd(f, nil), newSetupCmd(f, nil), newCollectCmd(f, nil), newReapCmd(f, nil),
		newUpCmd(f, nil), newStatusCmd(f, nil), newDownCmd(f, nil), newResultsCmd(f, nil), newDemoCmd(f, nil), newHashworkCmd(f, nil), newHashcheckCmd(f),
	}
}

func parseIDs(args []string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, usagef("instance id %q: want a positive number (see `vastfleet ls`)", a)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// knownIDs refuses ids the store has never seen, before anything is sent.
func knownIDs(ctx context.Context, st *store.Store, ids []int64) error {
	return nodes.AsUsage(nodes.Known(ctx, st, ids))
}

// stateOptions is what `stop` or `start` was asked.
type stateOptions struct {
	// Verb is stop or start.
	Verb string
	IDs  []int64
	cmdutil.JSONFlags
}

// newStateCmd is `stop` or `start` (verb): it parses into stateOptions and
// hands them to runF (tests) or stateRun.
func newStateCmd(f *factory.Factory, verb, short string, runF func(context.Context, *stateOptions) error) *cobra.Command {
	opts := &stateOptions{Verb: verb}
	cmd := &cobra.Command{
		Use:   verb + " ID...",
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			opts.IDs = ids
			return run(cmd, f, opts, runF, stateRun)
		},
	}
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print the ids acted on as JSON")
	return cmd
}

// idArgs writes ids back as the arguments they were given as.
func idArgs(ids []int64) []string {
	args := make([]string, len(ids))
	for i, id := range ids {
		args[i] = strconv.FormatInt(id, 10)
	}
	return args
}

// stateRun is `stop` or `start` once its flags are parsed.
func stateRun(ctx context.Context, f *factory.Factory, opts *stateOptions) error {
	verb, ids := opts.Verb, opts.IDs
	m, err := f.Manager(ctx, factory.HolderName(append([]string{verb}, idArgs(ids)...)...))
	if err != nil {
		return err
	}
	known := func(ctx context.Context, ids []int64) error { return knownIDs(ctx, m.S, ids) }
	if err := m.StopOrStart(ctx, verb, ids, known); err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), map[string]any{"action": verb, "ids": ids})
	}
	fmt.Fprintf(f.IO.ErrOut, "%s requested for %d instance(s)\n", verb, len(ids))
	return nil
}
