package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/nodes"
)

// collectOptions is what `collect` was asked, parsed.
type collectOptions struct {
	Nodes     nodeTargets
	RemoteDir string
	To        string
	Parallel  int
	cmdutil.JSONFlags
}

func newCollectCmd(f *factory.Factory, runF func(context.Context, *collectOptions) error) *cobra.Command {
	opts := &collectOptions{}
	cmd := &cobra.Command{
		Use:   "collect (--fleet F | --all | --id ID...) [--remote /workspace/project/results] [--to ./results]",
		Short: "Pull results from nodes into TO/<fleet>/<node>/, only files that changed since the last collect",
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, f, opts, runF, collectRun)
		},
	}
	fl := cmd.Flags()
	opts.Nodes.register(fl, "collect from", true)
	fl.StringVar(&opts.RemoteDir, "remote", "/workspace/project/results", "results directory on the nodes")
	fl.StringVar(&opts.To, "to", "results", "local directory; files land in TO/<fleet>/<node>/")
	fl.IntVar(&opts.Parallel, "parallel", 64, "nodes at once")
	limitFlags(fl, bounds{"parallel", "1", "1024"})
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print the per-node table as JSON")
	return withNeeds(f, cmd, reachesNodes)
}

func collectRun(ctx context.Context, f *factory.Factory, opts *collectOptions) error {
	ns, p, err := opts.Nodes.resolve(ctx, f)
	if err != nil {
		return err
	}
	rows, err := f.CollectNodes(ctx, p, ns, opts.RemoteDir, opts.To, opts.Parallel)
	if err != nil {
		return err
	}
	return reportNodes(f, "collect", rows, opts.JSONFlags, nodes.CollectHeader)
}
