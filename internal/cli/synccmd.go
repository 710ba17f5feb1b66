package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/nodes"
)

// syncOptions is what `sync` was asked, parsed.
type syncOptions struct {
	Nodes      nodeTargets
	Src        string
	Dest       string
	Excludes   []string
	Parallel   int
	RelaySeeds int
	NoRelay    bool
	cmdutil.JSONFlags
}

func newSyncCmd(f *factory.Factory, runF func(context.Context, *syncOptions) error) *cobra.Command {
	opts := &syncOptions{}
	cmd := &cobra.Command{
		Use:   "sync [SRC] (--fleet F | --all | --id ID...) [--dest /workspace/project] [--exclude PAT...]",
		Short: "Push a working tree to nodes: only the files each node lacks (by content hash), relayed node to node",
		Long: `Hashes every file of SRC (default .), asks each node for the hashes it holds
(DEST/.vastfleet-sync) and sends a gzip'd tar of only the files that differ.

Left out, in .gitignore syntax: ` + strings.Join(nodes.DefaultExcludes, " ") + `;
then the .gitignore and .vastfleetignore files of the tree apply (a
.vastfleetignore may re-include, e.g. !data/), then each --exclude.

Your uplink is the bottleneck for a fleet: this machine sends each archive
to --relay-seeds nodes, and every node that has it passes it on to another
with its own ssh client (a fresh key made for that one push, which opens the
target only to receive that archive and is removed after; the fleet key
never leaves this machine; the target's recorded host key checked), so the
bytes sent from here stay a
few times the archive however many nodes there are. A relay that fails is
sent from here instead. --no-relay sends from here to every node.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Src = "."
			if len(args) == 1 {
				opts.Src = args[0]
			}
			return run(cmd, f, opts, runF, syncRun)
		},
	}
	fl := cmd.Flags()
	opts.Nodes.register(fl, "sync to", true)
	fl.StringVar(&opts.Dest, "dest", "/workspace/project", "directory on the nodes")
	fl.StringSliceVar(&opts.Excludes, "exclude", nil, "more patterns to leave out (.gitignore syntax)")
	fl.IntVar(&opts.Parallel, "parallel", 64, "nodes at once")
	fl.IntVar(&opts.RelaySeeds, "relay-seeds", 3, "nodes this machine sends each archive to; the rest get it relayed")
	fl.BoolVar(&opts.NoRelay, "no-relay", false, "send from this machine to every node")
	limitFlags(fl, bounds{"parallel", "1", "1024"}, bounds{"relay-seeds", "1", "1024"})
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print the per-node table as JSON")
	return withNeeds(f, cmd, reachesNodes)
}

func syncRun(ctx context.Context, f *factory.Factory, opts *syncOptions) error {
	files, err := nodes.ScanSource(opts.Src, opts.Excludes)
	if err != nil {
		return err
	}
	ns, p, err := opts.Nodes.resolve(ctx, f)
	if err != nil {
		return err
	}
	rows, err := f.SyncNodes(ctx, p, ns, opts.Src, files, opts.Dest, opts.Parallel, opts.RelaySeeds, opts.NoRelay)
	if err != nil {
		return err
	}
	return reportNodes(f, "sync", rows, opts.JSONFlags, nodes.SyncHeader)
}
