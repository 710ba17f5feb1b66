package nodes

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/vastfleet/vastfleet/internal/remote"
)

// SyncRow is what sync sent one node.
type SyncRow struct {
	Node      string `json:"node"`
	ID        int64  `json:"id"`
	FilesSent int    `json:"files_sent"`
	FileBytes int64  `json:"file_bytes"`
	WireBytes int64  `json:"wire_bytes"`
	Via       string `json:"via,omitempty"` // the node that relayed the archive
	// DoneS is how many seconds after the sync began the node held the
	// tree; DownMbps its downlink as listed (0: not listed), and LinkS
	// the seconds its archive takes over that downlink: the least DoneS
	// could be.
	DoneS    float64 `json:"done_s,omitempty"`
	DownMbps float64 `json:"down_mbps,omitempty"`
	LinkS    float64 `json:"link_s,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// SyncOptions is a scanned tree and where it goes.
type SyncOptions struct {
	Src      string
	Files    []remote.TreeFile
	Dest     string
	Parallel int
	Seeds    int  // nodes this machine sends each archive to
	NoRelay  bool // send from this machine to every node
}

// SyncSummary is what a sync cost this machine.
type SyncSummary struct {
	Files, Nodes, Relayed int
	TreeBytes             int64
	// Sent is what this machine sent over SSH; Archives the part that
	// carried the archives.
	Sent, Archives int64
	// LastNode is when the last node sent to held the tree, after the
	// sync began. LinkBound is the least that could take: the longest a
	// node's archive takes over its own listed downlink (0: none listed).
	LastNode, LinkBound time.Duration
}

// Sync sends each node the files of the tree that it lacks under Dest,
// relayed node to node unless NoRelay.
func (o *Ops) Sync(ctx context.Context, nodes []Node, opts SyncOptions) ([]SyncRow, SyncSummary, error) {
	known, err := o.key.HostKeys()
	if err != nil {
		return nil, SyncSummary{}, err
	}
	dest := opts.Dest
	if o.cfg.Sim {
		dest = SimRelative(dest)
	}
	probes := make([]bytes.Buffer, len(nodes))
	jobs := make([]remote.Job, len(nodes))
	for i, n := range nodes {
		jobs[i] = remote.Job{Target: o.Target(n, known), Cmd: remote.SyncProbe(dest), Stdout: &probes[i], Stderr: io.Discard}
	}
	first := o.Run(ctx, nodes, jobs, opts.Parallel)
	rows := make([]SyncRow, len(nodes))
	var reached []remote.SyncNode
	var at []int
	for i, n := range nodes {
		rows[i] = SyncRow{Node: n.Name, ID: n.ID}
		if !first[i].OK() {
			rows[i].Error = fmt.Sprint(first[i].Err)
			continue
		}
		reached = append(reached, remote.SyncNode{Target: jobs[i].Target, State: remote.ParseSyncProbe(probes[i].String()), UpMbps: n.UpMbps})
		at = append(at, i)
	}
	sentBefore, _ := o.pool.Traffic()
	sum := SyncSummary{Files: len(opts.Files), Nodes: len(nodes)}
	ro := remote.SyncOptions{Dest: dest, Seeds: opts.Seeds, Parallel: opts.Parallel, Relay: !opts.NoRelay}
	for k, r := range remote.Sync(ctx, o.pool, opts.Src, opts.Files, reached, ro) {
		row := &rows[at[k]]
		row.FilesSent, row.FileBytes, row.WireBytes, row.Via = r.Files, r.FileBytes, r.WireBytes, r.Via
		row.DownMbps = nodes[at[k]].DownMbps
		if r.Err != nil {
			row.Error = r.Err.Error()
		} else if r.Took > 0 {
			row.DoneS = math.Round(r.Took.Seconds()*1000) / 1000
			sum.LastNode = max(sum.LastNode, r.Took)
			if row.DownMbps > 0 {
				link := float64(r.WireBytes) * 8 / (row.DownMbps * 1e6)
				row.LinkS = math.Round(link*1000) / 1000
				sum.LinkBound = max(sum.LinkBound, time.Duration(link*float64(time.Second)))
			}
		}
		if r.Via != "" {
			sum.Relayed++
		}
	}
	if ctx.Err() != nil {
		return nil, sum, ctx.Err()
	}
	sent, _ := o.pool.Traffic()
	sum.Sent, sum.Archives = sent, sent-sentBefore
	for _, fl := range opts.Files {
		sum.TreeBytes += fl.Size
	}
	return rows, sum, nil
}
