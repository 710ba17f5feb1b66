package cli

import (
	"context"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/nodes"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// collectOptions is what `collect` was asked, parsed.
type collectOptions struct {
	Nodes     nodeTargets
	RemoteDir string
	To        string
	Parallel  int
	cmdutil.JSONFlags
}

func newCollectCmd(f *factory, runF func(context.Context, *collectOptions) error) *cobra.Command {
	opts := &collectOptions{}
	cmd := &cobra.Command{
		Use:   "collect (--fleet F | --all | --id ID...) [--remote /workspace/project/results] [--to ./results]",
		Short: "Pull results from nodes into TO/<fleet>/<node>/, only files that changed since the last collect",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return collectRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	opts.Nodes.register(fl, "collect from", true)
	fl.StringVar(&opts.RemoteDir, "remote", "/workspace/project/results", "results directory on the nodes")
	fl.StringVar(&opts.To, "to", "results", "local directory; files land in TO/<fleet>/<node>/")
	fl.IntVar(&opts.Parallel, "parallel", 64, "nodes at once")
	limitFlags(fl, bounds{"parallel", "1", "1024"})
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print the per-node table as JSON")
	return cmd
}

func collectRun(ctx context.Context, f *factory, opts *collectOptions) error {
	ns, p, err := opts.Nodes.resolve(ctx, f)
	if err != nil {
		return err
	}
	rows, err := collectNodes(ctx, f, p, ns, opts.RemoteDir, opts.To, opts.Parallel)
	if err != nil {
		return err
	}
	return reportNodes(f, "collect", rows, opts.JSONFlags, func(r nodes.CollectRow) bool { return r.Error != "" },
		[]string{"NODE", "ID", "FILES", "FETCHED", "BYTES", "DIR", "SKIPPED", "ERROR"}, func(r nodes.CollectRow) []string {
			return []string{r.Node, strconv.FormatInt(r.ID, 10), strconv.Itoa(r.Files), strconv.Itoa(r.Fetched), strconv.FormatInt(r.FileBytes, 10), r.Dir, dash(strings.Join(r.Skipped, "; ")), dash(r.Error)}
		})
}

// runningNodes are the running instances among ids, as nodes with the
// operations that reach them; none (nil ops) when none runs.
func (f *factory) runningNodes(ctx context.Context, st *store.Store, ids []int64) ([]nodes.Node, *nodes.Ops, error) {
	running := nodes.Running(ctx, st, ids)
	if len(running) == 0 {
		return nil, nil, nil
	}
	ns, p, err := f.selectNodes(ctx, "", false, idArgs(running), true)
	if err != nil {
		return nil, nil, err
	}
	o, err := f.nodeOps(p, 64)
	return ns, o, err
}

// uncollected returns the running instances among ids whose results
// directory holds a file newer than their last collect (or any file, never
// collected), and the ones that could not be checked.
func (f *factory) uncollected(ctx context.Context, st *store.Store, ids []int64, resultsDir string) (map[int64]string, error) {
	ns, o, err := f.runningNodes(ctx, st, ids)
	if o == nil {
		return map[int64]string{}, err
	}
	return o.Uncollected(ctx, ns, resultsDir)
}

// collectNodes pulls each node's changed results into to/<fleet>/<node>/
// and marks the collect on the node.
func collectNodes(ctx context.Context, f *factory, p provider.Provider, ns []nodes.Node, remoteDir, to string, parallel int) ([]nodes.CollectRow, error) {
	o, err := f.nodeOps(p, parallel)
	if err != nil {
		return nil, err
	}
	return o.Collect(ctx, ns, remoteDir, to, parallel)
}

// collectBeforeDestroy is destroy --collect: every running node's results
// into ./results, refusing the destroy when a node could not be collected.
func (f *factory) collectBeforeDestroy(ctx context.Context, st *store.Store, ids []int64, resultsDir string) error {
	ns, o, err := f.runningNodes(ctx, st, ids)
	if o == nil {
		return err
	}
	return o.CollectFirst(ctx, ns, resultsDir, "results", f.io.ErrOut)
}
