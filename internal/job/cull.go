package job

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/stat"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Cull is one node the cull policy destroyed during the run, with the
// figures it was judged on. It is an event (the live view, --json) and
// a line of the job's record and report.
type Cull struct {
	About
	At        time.Time `json:"at"`
	ID        int64     `json:"id"`
	Node      string    `json:"node"`
	MachineID int64     `json:"machine_id"`
	Metric    string    `json:"metric"`
	// Mean is the node's mean Metric over its reports (0 with none), DPH
	// what it cost an hour, PerDPH the one over the other; Median is the
	// median PerDPH of every node that reported during the run (culled
	// ones included) and Share PerDPH over it.
	Mean    float64 `json:"mean"`
	DPH     float64 `json:"dph"`
	PerDPH  float64 `json:"per_dph"`
	Median  float64 `json:"median_per_dph"`
	Share   float64 `json:"share"`
	Below   float64 `json:"below"`
	Reports int     `json:"reports"`
	// Over is how long (market time) the node reported the metric, or
	// was silent, before it was judged.
	Over time.Duration `json:"over_ns"`
	// Error says the destroy failed (the node is left out of the run and
	// `vastfleet down` destroys it); empty when it went.
	Error string `json:"error,omitempty"`
	// Replacement is whether a node was rented in its place, and why
	// (not) with the payback figures; nil when the job cannot rent
	// (resumed by down) or the cull predates replacements.
	Replacement *Replacement `json:"replacement,omitempty"`
}

// CullUnjudged: the cull policy cannot judge the nodes, once per run.
type CullUnjudged struct {
	About
	Why string
}

// minCullPool is how many nodes must have reported before any is judged
// against their median: of two, the median is their mean, and the
// slower would always look short.
const minCullPool = 3

// culler follows what each running node delivers per dollar and names
// those the cull policy destroys.
type culler struct {
	p     jobfile.Cull
	job   string
	inst  map[int64]store.Instance // the job's instances: $/hr and machine
	nodes map[int64]*reports
	// silent is when each running node without a report of the metric
	// was first seen so (the coordinator's time): one that stays so for
	// the grace period while the others deliver delivers nothing.
	silent map[int64]time.Time
	// nothing are the nodes culled for silence: they delivered nothing
	// for their listing, which counts in perUnit.
	nothing map[int64]bool
	warned  bool
	unjudge func(why string)
}

// reports are one node's reports of the metric so far.
type reports struct {
	node        string
	first, last time.Time // the coordinator's time of its first and last counted report
	sum         float64
	n           int
}

func (v *reports) mean() float64 { return v.sum / float64(v.n) }

// perUnit is the metric the nodes delivered per unit the offers they
// were rented from advertise (units of listed): the mean over the nodes
// that reported and those culled for silence (at 0), culled ones
// included, so that a market's share of hosts short of what they list
// counts as it did in the fleet; 0 when no node's offer is known.
func (c *culler) perUnit(listed map[int64]market.Offer, units func(*market.Offer) float64) float64 {
	unitsOf := func(id int64) float64 {
		if o, ok := listed[c.inst[id].OfferID]; ok {
			return units(&o)
		}
		return 0
	}
	var sum float64
	n := 0
	for id := range c.nothing {
		if unitsOf(id) > 0 {
			n++
		}
	}
	for id, dv := range c.nodes {
		if u := unitsOf(id); u > 0 {
			sum += dv.mean() / u
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// newCuller reads the job's instances (their $/hr and machines) for the
// policy; nil when the job has none.
func newCuller(ctx context.Context, d *Deps, j *jobfile.Job, id string) *culler {
	if j.Cull == nil {
		return nil
	}
	c := &culler{p: *j.Cull, job: id, inst: map[int64]store.Instance{}, nodes: map[int64]*reports{},
		unjudge: func(why string) { d.emit(CullUnjudged{About{id}, why}) }}
	c.refresh(ctx, d)
	return c
}

// refresh rereads the job's instances (a node of the run unknown so far).
func (c *culler) refresh(ctx context.Context, d *Deps) {
	ins, err := d.Store.Instances(ctx, store.InstanceFilter{Fleet: c.job})
	if err != nil {
		return // judged on the next look
	}
	for _, in := range ins {
		c.inst[in.ID] = in
	}
}

// observe counts each running node's new report of the metric and
// returns the nodes to cull now: reported for the grace period, and
// under the share of the median per dollar of every node that has
// reported during the run (those culled or whose run ended included, at
// their mean, so that each cull does not raise the bar for the rest),
// or silent for the grace period. running are the nodes whose run has
// not ended (nor been culled).
func (c *culler) observe(snap wire.Snapshot, running map[int64]bool) []Cull {
	metric := c.metric(snap, running)
	if metric == "" {
		return nil
	}
	c.count(snap, running, metric)
	perDPH := map[int64]float64{}
	for id, dv := range c.nodes {
		perDPH[id] = dv.mean() / c.inst[id].DPHTotal
	}
	if len(perDPH) < minCullPool {
		return nil
	}
	median := stat.Median(slices.Collect(maps.Values(perDPH)))
	if median <= 0 {
		return nil
	}
	out := c.silentFor(snap, running, metric, median)
	for _, id := range slices.Sorted(maps.Keys(perDPH)) {
		dv, in := c.nodes[id], c.inst[id]
		share := perDPH[id] / median
		if !running[id] || dv.last.Sub(dv.first) < c.p.After || share >= c.p.Below {
			continue
		}
		out = append(out, Cull{About: About{c.job}, At: snap.At, ID: id, Node: dv.node, MachineID: in.MachineID, Metric: metric,
			Mean: dv.mean(), DPH: in.DPHTotal, PerDPH: perDPH[id], Median: median, Share: share, Below: c.p.Below,
			Reports: dv.n, Over: dv.last.Sub(dv.first)})
	}
	return out
}

// silentFor names the running nodes that have reported no metric for
// the grace period while the others delivered (median per $/hr): they
// cost their $/hr for nothing. The grace counts from when the node's
// agent is seen alive with its sessions running: a node still probing
// its machine, or whose agent has not reported yet, has not started the
// run (a lost agent is the watch's to judge). A node the store does not
// know is left.
func (c *culler) silentFor(snap wire.Snapshot, running map[int64]bool, metric string, median float64) []Cull {
	if c.silent == nil {
		c.silent = map[int64]time.Time{}
	}
	seen := map[int64]wire.Node{}
	for _, n := range snap.Nodes {
		seen[n.InstanceID] = n
	}
	var out []Cull
	for _, id := range slices.Sorted(maps.Keys(running)) {
		in, known := c.inst[id]
		n, ok := seen[id]
		if _, reported := c.nodes[id]; reported || !known || !ok || n.State != "alive" || n.Stage != "" {
			delete(c.silent, id)
			continue
		}
		since, ok := c.silent[id]
		if !ok {
			c.silent[id] = snap.At
			continue
		}
		if snap.At.Sub(since) < c.p.After {
			continue
		}
		delete(c.silent, id)
		if c.nothing == nil {
			c.nothing = map[int64]bool{}
		}
		c.nothing[id] = true
		out = append(out, Cull{About: About{c.job}, At: snap.At, ID: id, Node: n.Node, MachineID: in.MachineID, Metric: metric,
			DPH: in.DPHTotal, Median: median, Below: c.p.Below, Over: snap.At.Sub(since)})
	}
	return out
}

// count adds each running, alive node's new report of metric (one per
// heartbeat) to its mean.
func (c *culler) count(snap wire.Snapshot, running map[int64]bool, metric string) {
	for _, n := range snap.Nodes {
		v, ok := n.Metrics[metric]
		in, known := c.inst[n.InstanceID]
		if !running[n.InstanceID] || n.State != "alive" || !ok || !known || in.DPHTotal <= 0 {
			continue
		}
		dv := c.nodes[n.InstanceID]
		if dv == nil {
			dv = &reports{node: n.Node, first: n.LastSeen}
			c.nodes[n.InstanceID] = dv
		}
		if dv.n == 0 || n.LastSeen.After(dv.last) {
			dv.sum += v
			dv.n++
			dv.last = n.LastSeen
		}
	}
}

// metric is the metric the policy judges by: the one it names, else the
// one the running nodes report; "" (said once) when they report several.
func (c *culler) metric(snap wire.Snapshot, running map[int64]bool) string {
	if c.p.Metric != "" {
		return c.p.Metric
	}
	names := map[string]bool{}
	for _, n := range snap.Nodes {
		if running[n.InstanceID] {
			for k := range n.Metrics {
				names[k] = true
			}
		}
	}
	if len(names) > 1 {
		if !c.warned {
			c.warned = true
			c.unjudge(fmt.Sprintf("the nodes report %d metrics (%v): name the one to judge by in cull: {metric: NAME}", len(names), slices.Sorted(maps.Keys(names))))
		}
		return ""
	}
	for k := range names {
		return k
	}
	return ""
}

// cull takes a culled node out of the run: its results collected (when
// the job has a results directory), the instance destroyed, its machine
// on the bad-host list with the figures, the cull recorded and told. A
// node's leased items go back to the queue as a lost node's do, when its
// heartbeats stop.
func (r *runner) cull(ctx context.Context, k Cull, c *culler, t wire.Totals) {
	node := []Node{{ID: k.ID, Name: k.Node}}
	for _, n := range r.nodes {
		if n.ID == k.ID {
			node[0] = n
		}
	}
	if r.rec.Results != "" {
		// What it wrote so far is the job's: collect before it goes.
		_ = collectFiles(ctx, r.d, r.rec, node)
	}
	if err := r.d.Fleet.Destroy(ctx, []int64{k.ID}); err != nil {
		k.Error = fmt.Sprintf("destroying: %v (`vastfleet down %s` destroys it)", err, r.rec.ID)
	}
	if k.MachineID != 0 {
		now := r.d.Clock.Now()
		reason := fmt.Sprintf("culled by job %s: %s %.4g/s at $%.3f/hr is %.4g per $/hr, %.0f%% of the fleet's median %.4g (below %.0f%%)",
			r.rec.ID, k.Metric, k.Mean, k.DPH, k.PerDPH, 100*k.Share, k.Median, 100*k.Below)
		if err := r.d.Store.MarkBadHost(ctx, store.BadHost{MachineID: k.MachineID, Reason: reason, FailedAt: now,
			Until: now.Add(launch.DefaultBadHostTTL)}); err != nil && k.Error == "" {
			k.Error = "listing its machine as bad: " + err.Error()
		}
	}
	r.nodes = slices.DeleteFunc(r.nodes, func(n Node) bool { return n.ID == k.ID })
	k.Replacement = r.replacement(ctx, k, c, t)
	r.rec.Culls = append(r.rec.Culls, k)
	_ = r.save(ctx) // the next save tries again; the cull stands either way
	r.d.emit(k)
	if k.Replacement != nil && k.Replacement.State == Replacing {
		r.repl.ask(node[0])
	}
}
