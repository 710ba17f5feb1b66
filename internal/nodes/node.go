// Package nodes is a fleet's nodes as SSH reaches them, and the operations
// run over a set of them: exec, setup, sync and collect. Each operation
// has one shape: it takes the nodes and its options and returns one row
// per node, in the nodes' order; the caller prints the rows.
package nodes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// Node is one instance reached over SSH, with its place in the fleet.
type Node struct {
	Name   string // <fleet>-node-<rank>, the ssh-config alias
	Rank   int
	ID     int64
	Host   string
	Port   int
	NumGPU int
	CPUs   float64
	// DownMbps and UpMbps are the node's links as the listing gives them
	// (inet_down, inet_up); 0 when it does not.
	DownMbps, UpMbps float64
}

// Selection names nodes: a fleet's live instances, every live instance,
// or instance ids.
type Selection struct {
	Fleet string
	All   bool
	IDs   []int64
}

// UsageError is a selection that names no instance vastfleet can act on:
// the user's input, not the fleet, is wrong.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// AsUsage marks a UsageError in err as the user's input (usage.Error,
// exit 2) for the command line; other errors pass as they are.
func AsUsage(err error) error {
	var ue *UsageError
	if errors.As(err, &ue) {
		return usage.Errorf("%s", ue.Msg)
	}
	return err
}

// Known refuses ids the store has never seen or has seen destroyed,
// before anything is sent.
func Known(ctx context.Context, st *store.Store, ids []int64) error {
	for _, id := range ids {
		r, err := st.Instance(ctx, id)
		if err != nil {
			return &UsageError{fmt.Sprintf("instance %d is not one vastfleet tracks (see `vastfleet ls`, or `vastfleet reconcile` to adopt instances it created)", id)}
		}
		if !r.Live() {
			return &UsageError{fmt.Sprintf("instance %d was destroyed at %s", id, r.GoneAt.UTC().Format(time.RFC3339))}
		}
	}
	return nil
}

// Select resolves a selection to running instances with an SSH route,
// ranked by instance id so ranks are stable across commands.
func Select(ctx context.Context, st *store.Store, p provider.Provider, sel Selection) ([]Node, error) {
	recs, err := st.Instances(ctx, store.InstanceFilter{Fleet: sel.Fleet})
	if err != nil {
		return nil, err
	}
	if len(sel.IDs) > 0 {
		if err := Known(ctx, st, sel.IDs); err != nil {
			return nil, err
		}
		recs = slices.DeleteFunc(recs, func(r store.Instance) bool { return !slices.Contains(sel.IDs, r.ID) })
	}
	recs = slices.DeleteFunc(recs, func(r store.Instance) bool { return !r.GoneAt.IsZero() })
	if len(recs) == 0 {
		return nil, fmt.Errorf("no live instances selected (see `vastfleet ls`)")
	}
	listing, err := p.ListInstances(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing instances for their ssh addresses: %w", err)
	}
	live := map[int64]provider.Instance{}
	for _, in := range listing.Instances {
		live[in.ID] = in
	}
	slices.SortFunc(recs, func(a, b store.Instance) int { return int(a.ID - b.ID) })
	var out []Node
	for _, r := range recs {
		in, ok := live[r.ID]
		if !ok {
			return nil, fmt.Errorf("instance %d is not in the marketplace's listing (run `vastfleet reconcile`)", r.ID)
		}
		host, port, ok := provider.SSHAddr(in)
		if !ok || in.ActualStatus == nil || *in.ActualStatus != "running" {
			state := r.State
			if state == "" {
				state = "-"
			}
			return nil, fmt.Errorf("instance %d has no ssh route yet (state %s); wait for it to run, or leave it out", r.ID, state)
		}
		prefix := r.Fleet
		if prefix == "" {
			prefix = "vf"
		}
		out = append(out, Node{Name: fmt.Sprintf("%s-node-%d", prefix, len(out)), Rank: len(out), ID: r.ID,
			Host: host, Port: port, NumGPU: in.NumGPUs, CPUs: in.CPUCoresEffective, DownMbps: in.InetDown, UpMbps: in.InetUp})
	}
	return out, nil
}

// RankEnv is what every node is told about its place in the fleet, as
// SkyPilot's SKYPILOT_NODE_RANK and friends.
func RankEnv(all []Node, n Node) map[string]string {
	return map[string]string{
		"VASTFLEET_NODE_RANK":     strconv.Itoa(n.Rank),
		"VASTFLEET_NUM_NODES":     strconv.Itoa(len(all)),
		"VASTFLEET_NODE_IPS":      nodeIPs(all),
		"VASTFLEET_MASTER_ADDR":   all[0].Host,
		"VASTFLEET_GPUS_PER_NODE": strconv.Itoa(n.NumGPU),
		"VASTFLEET_NODE_NAME":     n.Name,
	}
}

// RankCommands is cmd for each node of all, in order, with the node's
// RankEnv exported first, byte for byte as remote.WithEnv(RankEnv(all, n),
// cmd). What every node shares (the address list, 10 KB at a thousand
// nodes) is joined and quoted once: per node it cost a 1,000-node exec
// 72 MB of garbage before the first connection.
func RankCommands(all []Node, cmd string) []string {
	if len(all) == 0 {
		return nil
	}
	// WithEnv sorts by name: GPUS_PER_NODE, then the shared MASTER_ADDR
	// and NODE_IPS, then NODE_NAME, NODE_RANK and NUM_NODES.
	shared := remote.WithEnv(map[string]string{"VASTFLEET_MASTER_ADDR": all[0].Host, "VASTFLEET_NODE_IPS": nodeIPs(all)}, "")
	num := strconv.Itoa(len(all))
	cmds := make([]string, len(all))
	for i, n := range all {
		var b strings.Builder
		head := remote.WithEnv(map[string]string{"VASTFLEET_GPUS_PER_NODE": strconv.Itoa(n.NumGPU)}, "")
		tail := remote.WithEnv(map[string]string{"VASTFLEET_NODE_NAME": n.Name, "VASTFLEET_NODE_RANK": strconv.Itoa(n.Rank), "VASTFLEET_NUM_NODES": num}, cmd)
		b.Grow(len(head) + len(shared) + len(tail))
		b.WriteString(head)
		b.WriteString(shared)
		b.WriteString(tail)
		cmds[i] = b.String()
	}
	return cmds
}

// PlacedCommands is cmd for each of nodes with the rank variables of
// fleet, each node standing at its Rank in it (in its place's address):
// a replacement run alone is told the fleet the others were.
func PlacedCommands(fleet, nodes []Node, cmd string) []string {
	all := slices.Clone(fleet)
	for _, n := range nodes {
		if n.Rank >= 0 && n.Rank < len(all) {
			all[n.Rank] = n
		}
	}
	cmds := make([]string, len(nodes))
	for i, n := range nodes {
		cmds[i] = remote.WithEnv(RankEnv(all, n), cmd)
	}
	return cmds
}

// nodeIPs is VASTFLEET_NODE_IPS: every node's address, one a line.
func nodeIPs(all []Node) string {
	ips := make([]string, len(all))
	for i, m := range all {
		ips[i] = m.Host
	}
	return strings.Join(ips, "\n")
}

// SimRelative maps /workspace and /root to a simulated instance's own
// directory (the sessions' working directory); absolute paths there would
// be this machine's.
func SimRelative(p string) string {
	for _, root := range []string{"/workspace", "/root"} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return "." + strings.TrimPrefix(p, root)
		}
	}
	return p
}
