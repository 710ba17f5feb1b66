package nodes

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/remote"
)

// ExecRow is what a command did on one node.
type ExecRow struct {
	Node       string  `json:"node"`
	ID         int64   `json:"id"`
	Rank       int     `json:"rank"`
	ExitCode   int     `json:"exit_code"`
	DurationS  float64 `json:"duration_s"`
	Error      string  `json:"error,omitempty"`
	OutputFile string  `json:"output_file,omitempty"`
}

// Failed reports whether the command failed on the row's node.
func (r ExecRow) Failed() bool { return r.ExitCode != 0 || r.Error != "" }

// ExecOptions is a command to run on every node, with rank variables.
type ExecOptions struct {
	Command  string
	Parallel int
	Timeout  time.Duration // per node; 0: no limit
	// OutDir, when set, takes each node's output as OUTDIR/<node>.log;
	// else it goes to the Ops' Out, prefixed, unless Quiet.
	OutDir string
	Quiet  bool
	// Fleet, when set, is the fleet the nodes' ranks are places of:
	// VASTFLEET_NUM_NODES, MASTER_ADDR and NODE_IPS are its, each node at
	// its rank (a replacement taking a culled node's place).
	Fleet []Node
}

// Exec runs a command on every node.
func (o *Ops) Exec(ctx context.Context, nodes []Node, opts ExecOptions) ([]ExecRow, error) {
	known, err := o.key.HostKeys()
	if err != nil {
		return nil, err
	}
	if opts.OutDir != "" {
		if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex
	jobs := make([]remote.Job, len(nodes))
	var writers []*prefixWriter
	var files []*os.File
	defer func() {
		for _, fh := range files {
			fh.Close()
		}
	}()
	cmds := RankCommands(nodes, opts.Command)
	if opts.Fleet != nil {
		cmds = PlacedCommands(opts.Fleet, nodes, opts.Command)
	}
	for i, n := range nodes {
		j := remote.Job{Target: o.Target(n, known), Cmd: cmds[i], Timeout: opts.Timeout}
		switch {
		case opts.OutDir != "":
			fh, err := os.Create(filepath.Join(opts.OutDir, n.Name+".log"))
			if err != nil {
				return nil, err
			}
			files = append(files, fh)
			j.Stdout, j.Stderr = fh, fh
		case opts.Quiet:
			j.Stdout, j.Stderr = io.Discard, io.Discard
		default:
			w := &prefixWriter{mu: &mu, out: o.cfg.Out, prefix: "[" + n.Name + "] "}
			writers = append(writers, w)
			j.Stdout, j.Stderr = w, w
		}
		jobs[i] = j
	}
	res := o.Run(ctx, nodes, jobs, opts.Parallel)
	for _, w := range writers {
		w.flush()
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	rows := make([]ExecRow, len(nodes))
	for i, r := range res {
		rows[i] = ExecRow{Node: nodes[i].Name, ID: nodes[i].ID, Rank: nodes[i].Rank, ExitCode: r.Exit,
			DurationS: r.Duration.Seconds()}
		if r.Err != nil {
			rows[i].Error = r.Err.Error()
		}
		if opts.OutDir != "" {
			rows[i].OutputFile = filepath.Join(opts.OutDir, nodes[i].Name+".log")
		}
	}
	return rows, nil
}
