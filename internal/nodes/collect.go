package nodes

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/shell"
)

// CollectRow is what collect fetched from one node.
type CollectRow struct {
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

// Collect pulls each node's changed results in remoteDir into
// to/<fleet>/<node>/ and marks the collect on the node.
func (o *Ops) Collect(ctx context.Context, nodes []Node, remoteDir, to string, parallel int) ([]CollectRow, error) {
	if o.cfg.Sim {
		remoteDir = SimRelative(remoteDir)
	}
	known, err := o.key.HostKeys()
	if err != nil {
		return nil, err
	}
	cn := make([]remote.CollectNode, len(nodes))
	rows := make([]CollectRow, len(nodes))
	for i, n := range nodes {
		dir := filepath.Join(to, n.Name[:strings.LastIndex(n.Name, "-node-")], n.Name)
		rows[i] = CollectRow{Node: n.Name, ID: n.ID, Dir: dir}
		cn[i] = remote.CollectNode{Target: o.Target(n, known), Dir: dir}
	}
	res, err := remote.Collect(ctx, o.pool, remoteDir, cn, remote.CollectOptions{Parallel: parallel,
		// The listing jobs are in nodes' order; a node that refused the
		// fleet key gets it attached and is listed again.
		List: func(ctx context.Context, jobs []remote.Job) []remote.Result { return o.Run(ctx, nodes, jobs, parallel) }})
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

// Uncollected returns the nodes whose results directory holds a file
// newer than their last collect (or any file, never collected), each with
// why; a node that does not answer is noted on ErrOut and left out, so it
// does not hold a destroy (and its bill) hostage.
func (o *Ops) Uncollected(ctx context.Context, nodes []Node, resultsDir string) (map[int64]string, error) {
	if o.cfg.Sim {
		resultsDir = SimRelative(resultsDir)
	}
	known, err := o.key.HostKeys()
	if err != nil {
		return nil, err
	}
	q := shell.Quote(resultsDir)
	mark, started := remote.CollectedMark, remote.CollectStarted
	found := make([]bytes.Buffer, len(nodes))
	jobs := make([]remote.Job, len(nodes))
	for i, n := range nodes {
		jobs[i] = remote.Job{Target: o.Target(n, known), Stdout: &found[i], Stderr: io.Discard,
			Cmd: "cd " + q + " 2>/dev/null || exit 0; if [ -e " + mark + " ]; then find . -type f -newer " + mark +
				" ! -name " + mark + " ! -name " + started + "; else find . -type f ! -name " + started + "; fi | head -1"}
	}
	out := map[int64]string{}
	for i, r := range o.Run(ctx, nodes, jobs, 64) {
		switch {
		case !r.OK():
			fmt.Fprintf(o.cfg.ErrOut, "warning: instance %d: results not checked, the node did not answer (%v); vast's copy works on stopped instances\n", nodes[i].ID, r.Err)
		case strings.TrimSpace(found[i].String()) != "":
			out[nodes[i].ID] = fmt.Sprintf("%s holds results newer than the last collect (e.g. %s)", resultsDir, strings.TrimSpace(found[i].String()))
		}
	}
	return out, nil
}
