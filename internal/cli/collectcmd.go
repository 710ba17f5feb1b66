package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/shell"
	"github.com/vastfleet/vastfleet/internal/store"
)

type collectRow struct {
	Node      string `json:"node"`
	ID        int64  `json:"id"`
	Files     int    `json:"files"`
	Fetched   int    `json:"fetched"`
	FileBytes int64  `json:"file_bytes"`
	Dir       string `json:"dir"`
	// Skipped names what the node listed or sent that was not written:
	// special files, and names that would leave the results directory.
	Skipped []string `json:"skipped,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// collectOptions is what `collect` was asked, parsed.
type collectOptions struct {
	Nodes     nodeTargets
	RemoteDir string
	To        string
	Parallel  int
	JSONFlags
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
	addJSONFlags(fl, &opts.JSONFlags, "print the per-node table as JSON")
	return cmd
}

func collectRun(ctx context.Context, f *factory, opts *collectOptions) error {
	nodes, p, err := opts.Nodes.resolve(ctx, f)
	if err != nil {
		return err
	}
	rows, err := collectNodes(ctx, f, p, nodes, opts.RemoteDir, opts.To, opts.Parallel)
	if err != nil {
		return err
	}
	return reportNodes(f, "collect", rows, opts.JSONFlags, func(r collectRow) bool { return r.Error != "" },
		[]string{"NODE", "ID", "FILES", "FETCHED", "BYTES", "DIR", "SKIPPED", "ERROR"}, func(r collectRow) []string {
			return []string{r.Node, strconv.FormatInt(r.ID, 10), strconv.Itoa(r.Files), strconv.Itoa(r.Fetched), strconv.FormatInt(r.FileBytes, 10), r.Dir, dash(strings.Join(r.Skipped, "; ")), dash(r.Error)}
		})
}

// simRelative maps /workspace and /root to a simulated instance's own
// directory (the sessions' working directory); absolute paths there would
// be this machine's.
func simRelative(p string) string {
	for _, root := range []string{"/workspace", "/root"} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return "." + strings.TrimPrefix(p, root)
		}
	}
	return p
}

// Marks kept in a node's results directory (remote.Collect owns them).
const (
	collectedMark  = remote.CollectedMark
	collectStarted = remote.CollectStarted
)

// uncollected returns the running instances among ids whose results
// directory holds a file newer than their last collect (or any file, never
// collected), and the ones that could not be checked.
func (f *factory) uncollected(ctx context.Context, st *store.Store, ids []int64, resultsDir string) (map[int64]string, error) {
	var running []string
	for _, id := range ids {
		r, err := st.Instance(ctx, id)
		if err == nil && r.State == "running" && r.GoneAt.IsZero() {
			running = append(running, strconv.FormatInt(id, 10))
		}
	}
	out := map[int64]string{}
	if len(running) == 0 {
		return out, nil
	}
	nodes, p, err := f.selectNodes(ctx, "", false, running, true)
	if err != nil {
		return nil, err
	}
	if f.opts.Market == "sim" {
		resultsDir = simRelative(resultsDir)
	}
	s, err := f.sshSession(ctx, p, 64)
	if err != nil {
		return nil, err
	}
	known, err := s.key.hostKeys()
	if err != nil {
		return nil, err
	}
	q := shell.Quote(resultsDir)
	found := make([]bytes.Buffer, len(nodes))
	jobs := make([]remote.Job, len(nodes))
	for i, n := range nodes {
		jobs[i] = remote.Job{Target: s.target(n, known), Stdout: &found[i], Stderr: io.Discard,
			Cmd: "cd " + q + " 2>/dev/null || exit 0; if [ -e " + collectedMark + " ]; then find . -type f -newer " + collectedMark +
				" ! -name " + collectedMark + " ! -name " + collectStarted + "; else find . -type f ! -name " + collectStarted + "; fi | head -1"}
	}
	for i, r := range s.run(ctx, nodes, jobs, 64) {
		switch {
		case !r.OK():
			// A node that does not answer cannot be collected from either:
			// say so, but do not hold a destroy (and its bill) hostage.
			fmt.Fprintf(f.io.ErrOut, "warning: instance %d: results not checked, the node did not answer (%v); vast's copy works on stopped instances\n", nodes[i].ID, r.Err)
		case strings.TrimSpace(found[i].String()) != "":
			out[nodes[i].ID] = fmt.Sprintf("%s holds results newer than the last collect (e.g. %s)", resultsDir, strings.TrimSpace(found[i].String()))
		}
	}
	return out, nil
}

// collectNodes pulls each node's changed results into to/<fleet>/<node>/
// and marks the collect on the node.
func collectNodes(ctx context.Context, f *factory, p provider.Provider, nodes []node, remoteDir, to string, parallel int) ([]collectRow, error) {
	if f.opts.Market == "sim" {
		remoteDir = simRelative(remoteDir)
	}
	s, err := f.sshSession(ctx, p, parallel)
	if err != nil {
		return nil, err
	}
	known, err := s.key.hostKeys()
	if err != nil {
		return nil, err
	}
	cn := make([]remote.CollectNode, len(nodes))
	rows := make([]collectRow, len(nodes))
	for i, n := range nodes {
		dir := filepath.Join(to, n.Name[:strings.LastIndex(n.Name, "-node-")], n.Name)
		rows[i] = collectRow{Node: n.Name, ID: n.ID, Dir: dir}
		cn[i] = remote.CollectNode{Target: s.target(n, known), Dir: dir}
	}
	res, err := remote.Collect(ctx, s.pool, remoteDir, cn, remote.CollectOptions{Parallel: parallel,
		// The listing jobs are in nodes' order; a node that refused the
		// fleet key gets it attached and is listed again.
		List: func(ctx context.Context, jobs []remote.Job) []remote.Result { return s.run(ctx, nodes, jobs, parallel) }})
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		rows[i].Files, rows[i].Fetched, rows[i].FileBytes = r.Files, r.Fetched, r.FileBytes
		for _, sk := range r.Skipped {
			rows[i].Skipped = append(rows[i].Skipped, sk.String())
		}
		if r.Err != nil {
			rows[i].Error = r.Err.Error()
		}
	}
	return rows, nil
}

// collectBeforeDestroy is destroy --collect: every running node's results
// into ./results, refusing the destroy when a node could not be collected.
func (f *factory) collectBeforeDestroy(ctx context.Context, st *store.Store, ids []int64, resultsDir string) error {
	var running []string
	for _, id := range ids {
		r, err := st.Instance(ctx, id)
		if err == nil && r.State == "running" && r.GoneAt.IsZero() {
			running = append(running, strconv.FormatInt(id, 10))
		}
	}
	if len(running) == 0 {
		return nil
	}
	nodes, p, err := f.selectNodes(ctx, "", false, running, true)
	if err != nil {
		return err
	}
	rows, err := collectNodes(ctx, f, p, nodes, resultsDir, "results", 64)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.Error != "" {
			return fmt.Errorf("nothing destroyed: collecting from instance %d failed: %s", r.ID, r.Error)
		}
		fmt.Fprintf(f.io.ErrOut, "collected %d file(s) from instance %d into %s\n", r.Fetched, r.ID, r.Dir)
	}
	return nil
}
