package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/nodes"
	"github.com/vastfleet/vastfleet/internal/provider"
)

// nodeTargets is which nodes a fan-out command acts on: a fleet's live
// instances, every live instance, or the instance ids given.
type nodeTargets struct {
	Fleet string
	All   bool
	IDs   []string
}

// register adds --fleet and --all, and --id where the ids are not the
// command's arguments; verb completes the help ("sync to").
func (n *nodeTargets) register(fl *pflag.FlagSet, verb string, idFlag bool) {
	fl.StringVar(&n.Fleet, "fleet", "", verb+" this fleet's live instances")
	fl.BoolVar(&n.All, "all", false, verb+" every live instance")
	if idFlag {
		fl.StringSliceVar(&n.IDs, "id", nil, verb+" these instance IDs")
	}
}

func (n *nodeTargets) resolve(ctx context.Context, f *factory.Factory) ([]nodes.Node, provider.Provider, error) {
	return selectNodes(ctx, f, n.Fleet, n.All, n.IDs)
}

// reachesNodes is the need of a command that connects to the nodes: the
// in-process simulator's instances have machines behind them.
func reachesNodes([]string) factory.Needs { return factory.Needs{SimHosts: true} }

// selectNodes is factory.SelectNodes of the instance ids given as
// arguments.
func selectNodes(ctx context.Context, f *factory.Factory, fleetName string, all bool, args []string) ([]nodes.Node, provider.Provider, error) {
	ids, err := parseIDs(args)
	if err != nil {
		return nil, nil, err
	}
	return f.SelectNodes(ctx, fleetName, all, ids)
}

// execOptions is what `exec` was asked: flags and arguments, parsed.
type execOptions struct {
	Nodes    nodeTargets
	Command  string
	Parallel int
	Timeout  time.Duration
	OutDir   string
	cmdutil.JSONFlags
}

// newExecCmd parses into execOptions and hands them to runF (tests) or
// execRun.
func newExecCmd(f *factory.Factory, runF func(context.Context, *execOptions) error) *cobra.Command {
	opts := &execOptions{}
	cmd := &cobra.Command{
		Use:   "exec (--fleet F | --all | ID...) [--parallel K] [--timeout D] [--out DIR] -- CMD",
		Short: "Run a command on every node over SSH, with rank variables; a table of exit codes",
		Long: `Runs CMD with sh on each node over one reused SSH connection per node. Each
node gets VASTFLEET_NODE_RANK, VASTFLEET_NUM_NODES, VASTFLEET_NODE_IPS
(newline-separated), VASTFLEET_MASTER_ADDR (rank 0's address),
VASTFLEET_GPUS_PER_NODE and VASTFLEET_NODE_NAME. Output is shown live,
each line prefixed with its node, or written to DIR/<node>.log with --out.
Exit status: 0 when every node exited 0, 3 when some failed, 1 when all did.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash < 0 || dash == len(args) {
				return usagef("give the command after --, e.g. vastfleet exec --fleet f -- nvidia-smi")
			}
			opts.Command = strings.Join(args[dash:], " ")
			opts.Nodes.IDs = args[:dash]
			return run(cmd, f, opts, runF, execRun)
		},
	}
	fl := cmd.Flags()
	opts.Nodes.register(fl, "run on", false)
	fl.IntVar(&opts.Parallel, "parallel", 64, "nodes at once")
	fl.DurationVar(&opts.Timeout, "timeout", 0, "give up on a node after D (0: no limit)")
	limitFlags(fl, bounds{"parallel", "1", "1024"}, bounds{"timeout", "0", "720h"})
	fl.StringVar(&opts.OutDir, "out", "", "write each node's output to DIR/<node>.log instead of the terminal")
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print the result table as JSON")
	return withNeeds(f, cmd, reachesNodes)
}

func execRun(ctx context.Context, f *factory.Factory, opts *execOptions) error {
	ns, p, err := opts.Nodes.resolve(ctx, f)
	if err != nil {
		return err
	}
	o, err := f.NodeOps(p, opts.Parallel)
	if err != nil {
		return err
	}
	rows, err := o.Exec(ctx, ns, nodes.ExecOptions{Command: opts.Command, Parallel: opts.Parallel, Timeout: opts.Timeout, OutDir: opts.OutDir, Quiet: opts.JSON})
	if err != nil {
		return err
	}
	return reportNodes(f, "the command", rows, opts.JSONFlags, nodes.ExecHeader)
}

// reportNodes prints what an operation did on each node, as JSON or as a
// table, and returns its outcome (nodes.Outcome).
func reportNodes[R nodes.Row](f *factory.Factory, what string, rows []R, js cmdutil.JSONFlags, header []string) error {
	if err := cmdutil.PrintRows(f.IO.Out, js, rows, header, R.Cells); err != nil {
		return err
	}
	return nodes.Outcome(what, rows)
}
