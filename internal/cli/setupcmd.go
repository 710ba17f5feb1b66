package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/nodes"
)

// setupOptions is what `setup` was asked, parsed.
type setupOptions struct {
	Nodes    nodeTargets
	Phases   []string
	Verify   string
	Force    bool
	Parallel int
	Timeout  time.Duration
	cmdutil.JSONFlags
}

func newSetupCmd(f *factory.Factory, runF func(context.Context, *setupOptions) error) *cobra.Command {
	opts := &setupOptions{}
	cmd := &cobra.Command{
		Use:   "setup (--fleet F | --all | ID...) --phase CMD [--phase CMD...] [--verify CMD]",
		Short: "Install an environment on every node in ordered phases, once per spec, and verify it",
		Long: `Runs each --phase in order on every node, one install per phase, so that a
later phase cannot move what an earlier one pinned, e.g.
  --phase 'pip install torch==2.4.0' --phase 'pip install -r requirements.txt'
A node that fails a phase runs no later phase. The SHA-256 of the phases is
recorded on each node (~/.vastfleet/setup.sha256) once they all pass (and
the verification, when given): a node holding the same hash is skipped, so
re-running an unchanged setup is cheap; --force installs again.
--verify runs last on every node, installed or skipped, and its output is
shown, e.g. --verify 'python -c "import torch; print(torch.cuda.is_available())"'.
Exit status: 0 when every node is set up, 3 when some failed, 1 when all did.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(opts.Phases) == 0 {
				return usagef("give at least one --phase")
			}
			opts.Nodes.IDs = args
			return run(cmd, f, opts, runF, setupRun)
		},
	}
	fl := cmd.Flags()
	opts.Nodes.register(fl, "set up", false)
	fl.StringArrayVar(&opts.Phases, "phase", nil, "an install command; phases run in the order given")
	fl.StringVar(&opts.Verify, "verify", "", "a command run last on every node, its output shown")
	fl.BoolVar(&opts.Force, "force", false, "install even where the recorded spec is the same")
	fl.IntVar(&opts.Parallel, "parallel", 64, "nodes at once")
	fl.DurationVar(&opts.Timeout, "timeout", 0, "give up on a node's phase after D (0: no limit)")
	limitFlags(fl, bounds{"parallel", "1", "1024"}, bounds{"timeout", "0", "720h"})
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print the result table as JSON")
	return withNeeds(f, cmd, reachesNodes)
}

func setupRun(ctx context.Context, f *factory.Factory, opts *setupOptions) error {
	ns, p, err := opts.Nodes.resolve(ctx, f)
	if err != nil {
		return err
	}
	o, err := f.NodeOps(p, opts.Parallel)
	if err != nil {
		return err
	}
	rows, err := o.Setup(ctx, ns, nodes.SetupOptions{Phases: opts.Phases, Verify: opts.Verify, Force: opts.Force,
		Parallel: opts.Parallel, Timeout: opts.Timeout, Quiet: opts.JSON})
	if err != nil {
		return err
	}
	return reportNodes(f, "setup", rows, opts.JSONFlags, nodes.SetupHeader)
}
