package job

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// NodeLog is one node's logs.
type NodeLog struct {
	Node   string `json:"node"`
	ID     int64  `json:"id"`
	Source string `json:"source"` // "sessions" (the agent's logs, over SSH) or "container"
	Log    string `json:"log"`
	Error  string `json:"error,omitempty"`
}

// LogsOptions pick the logs: one node (rank, node-RANK, its name or its
// instance id; all when empty), one session (all when empty), the last
// Tail lines (all when 0).
type LogsOptions struct {
	Node, Session string
	Tail          int
	// Container is a node's container log, for a node out of SSH reach.
	Container func(ctx context.Context, id int64, tail int) (string, error)
}

// Logs are the session logs of the nodes that ran the job, read over SSH
// from each node's agent; a node out of reach gives its container log.
// Nodes are named as up names them: by rank in instance-id order.
func Logs(ctx context.Context, d *Deps, rec *Record, o LogsOptions) ([]NodeLog, error) {
	rank, ids, err := logNodes(ctx, d, rec, o.Node)
	if err != nil {
		return nil, err
	}
	out, err := sessionLogs(ctx, d, ids, o)
	if err != nil {
		return nil, err
	}
	all := make([]NodeLog, 0, len(ids))
	for _, id := range ids {
		l, ok := out[id]
		if !ok {
			l = NodeLog{ID: id, Source: "container"}
			text, err := o.Container(ctx, id, o.Tail)
			if err != nil {
				l.Error = err.Error()
			}
			l.Log = text
		}
		l.Node = fmt.Sprintf("%s-node-%d", rec.ID, rank[id])
		all = append(all, l)
	}
	return all, nil
}

// logNodes are the job's instances with their ranks (in id order, a
// replacement in its culled node's), and those whose logs are asked for
// (a rank picks the culled node and its replacement).
func logNodes(ctx context.Context, d *Deps, rec *Record, sel string) (rank map[int64]int, picked []int64, err error) {
	ids := slices.Clone(rec.RunIDs)
	if len(ids) == 0 {
		recs, err := d.Store.Instances(ctx, store.InstanceFilter{Fleet: rec.ID})
		if err != nil {
			return nil, nil, err
		}
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	if len(ids) == 0 {
		return nil, nil, fmt.Errorf("job %s has no nodes yet (see `vastfleet status %s`)", rec.ID, rec.ID)
	}
	rank = nodeRanks(rec, ids)
	if sel == "" {
		return rank, ids, nil
	}
	places := 0
	for _, id := range ids {
		r := strconv.Itoa(rank[id])
		places = max(places, rank[id]+1)
		if sel == r || sel == "node-"+r || sel == rec.ID+"-node-"+r || sel == strconv.FormatInt(id, 10) {
			picked = append(picked, id)
		}
	}
	if len(picked) > 0 {
		return rank, picked, nil
	}
	return nil, nil, usage.Error{Err: fmt.Errorf("--node %q: job %s has nodes 0..%d (rank, node-RANK or instance id)", sel, rec.ID, places-1)}
}

// nodeRanks are the places of ids, as up gave them: the nodes that began
// the run in id order, each replacement in the place of the node it
// replaced (culls are recorded in order, so a culled replacement's place
// is known before its own replacement's).
func nodeRanks(rec *Record, ids []int64) map[int64]int {
	replaced := map[int64]int64{} // replacement → culled
	for _, k := range rec.Culls {
		if rp := k.Replacement; rp != nil && rp.State == Replaced {
			replaced[rp.InstanceID] = k.ID
		}
	}
	rank := map[int64]int{}
	for _, id := range ids {
		if _, ok := replaced[id]; !ok {
			rank[id] = len(rank)
		}
	}
	for _, k := range rec.Culls {
		if rp := k.Replacement; rp != nil && rp.State == Replaced {
			rank[rp.InstanceID] = rank[k.ID]
		}
	}
	return rank
}

// sessionLogs reads the agent's session logs of the nodes the marketplace
// lists as running.
func sessionLogs(ctx context.Context, d *Deps, want []int64, o LogsOptions) (map[int64]NodeLog, error) {
	var all []Node
	for _, id := range want {
		all = append(all, Node{ID: id})
	}
	reach, _ := running(ctx, d.Provider, all)
	out := map[int64]NodeLog{}
	if len(reach) == 0 {
		return out, nil
	}
	nodes, err := d.Nodes.Select(ctx, ids(reach))
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "vastfleet-logs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rows, err := d.Nodes.Exec(ctx, nodes, logScript(o.Session, o.Tail), dir)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if r.Error != "" {
			continue // the container log instead
		}
		if b, err := os.ReadFile(r.LogFile); err == nil {
			out[r.ID] = NodeLog{ID: r.ID, Source: "sessions", Log: string(b)}
		}
	}
	return out, nil
}

// logScript prints the agent's session logs, each under its name.
func logScript(session string, tail int) string {
	lines := "cat"
	if tail > 0 {
		lines = "tail -n " + strconv.Itoa(tail)
	}
	glob := "*.log"
	if session != "" {
		glob = session + ".log"
	}
	return `d="${VASTFLEET_AGENT_DIR:-$HOME/.vastfleet}/logs"; n=0; for f in "$d"/` + glob + `; do [ -f "$f" ] || continue; n=1; s=$(basename "$f" .log); echo "--- session $s"; ` + lines + ` "$f"; done; [ $n = 1 ] || echo "(no session log in $d yet)"`
}
