package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vastfleet/vastfleet/internal/store"
)

// jobNodeLog is one node's part of `vastfleet logs JOB`.
type jobNodeLog struct {
	Node  string `json:"node"`
	ID    int64  `json:"id"`
	Rank  int    `json:"rank"`
	Log   string `json:"log"`
	Error string `json:"error,omitempty"`
}

// jobLogsReport is `vastfleet logs JOB --json`.
type jobLogsReport struct {
	Job   string       `json:"job"`
	State string       `json:"state"`
	Nodes []jobNodeLog `json:"nodes"`
}

// jobLogs reads the last tail lines of every agent session's log (run,
// the named sessions, the item worker) on the job's running nodes, or on
// the one node given as an instance id or a rank. The logs live on the
// nodes, so this works from any terminal while the nodes do.
func jobLogs(ctx context.Context, f *factory, id, nodeSel string, tail int, asJSON bool) error {
	rec, err := loadJob(f, id)
	if err != nil {
		return err
	}
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return err
	}
	recs, err := st.Instances(ctx, store.InstanceFilter{Fleet: rec.ID})
	if err != nil {
		return err
	}
	recs = slices.DeleteFunc(recs, func(r store.Instance) bool { return !r.GoneAt.IsZero() || r.State != "running" })
	if len(recs) == 0 {
		return fmt.Errorf("job %s (%s): no running node to read logs from; its collected results are in %s", rec.ID, rec.State, rec.LocalDir)
	}
	// Ranks count the job's nodes by instance id, as selectNodes names them.
	slices.SortFunc(recs, func(a, b store.Instance) int { return int(a.ID - b.ID) })
	ids := make([]string, 0, len(recs))
	for i, r := range recs {
		n := strconv.FormatInt(r.ID, 10)
		if nodeSel == "" || nodeSel == n || nodeSel == strconv.Itoa(i) || nodeSel == fmt.Sprintf("%s-node-%d", rec.ID, i) {
			ids = append(ids, n)
		}
	}
	if len(ids) == 0 {
		return usagef("--node %q: not a running node of job %s (an instance id or a rank 0..%d)", nodeSel, rec.ID, len(recs)-1)
	}
	nodes, p, err := f.selectNodes(ctx, "", false, ids, true)
	if err != nil {
		return err
	}
	if nodeSel != "" {
		for i := range recs {
			if strconv.FormatInt(recs[i].ID, 10) == ids[0] {
				nodes[0].Rank, nodes[0].Name = i, fmt.Sprintf("%s-node-%d", rec.ID, i)
			}
		}
	}
	dir, err := os.MkdirTemp("", "vastfleet-logs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lines := "-n " + strconv.Itoa(tail)
	if tail == 0 {
		lines = "-n +1"
	}
	cmd := `D="${VASTFLEET_AGENT_DIR:-$HOME/.vastfleet}"; found=; for f in "$D"/logs/*.log; do [ -f "$f" ] || continue; found=1; n=${f##*/}; echo "==> ${n%.log} <=="; tail ` + lines + ` "$f"; done; [ -n "$found" ] || echo "(no session has logged yet)"`
	rows, err := execOnNodes(ctx, f, p, nodes, cmd, 64, 0, dir, true)
	if err != nil {
		return err
	}
	rep := jobLogsReport{Job: rec.ID, State: rec.State}
	for i, r := range rows {
		b, _ := os.ReadFile(filepath.Join(dir, nodes[i].Name+".log"))
		nl := jobNodeLog{Node: nodes[i].Name, ID: r.ID, Rank: nodes[i].Rank, Log: string(b), Error: r.Error}
		if r.Error == "" && r.ExitCode != 0 {
			nl.Error = fmt.Sprintf("exit %d", r.ExitCode)
		}
		rep.Nodes = append(rep.Nodes, nl)
	}
	if asJSON {
		return writeJSON(f.io.Out, rep)
	}
	for _, n := range rep.Nodes {
		fmt.Fprintf(f.io.Out, "=== %s (instance %d) ===\n", n.Node, n.ID)
		// A log is the program's own output: safe line by line, newlines kept.
		for _, l := range strings.SplitAfter(strings.TrimSuffix(n.Log, "\n"), "\n") {
			fmt.Fprintln(f.io.Out, termSafe(strings.TrimSuffix(l, "\n")))
		}
		if n.Error != "" {
			fmt.Fprintf(f.io.Out, "(%s)\n", termSafe(n.Error))
		}
	}
	return nil
}
