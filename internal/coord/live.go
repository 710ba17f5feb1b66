package coord

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/stat"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Node states by heartbeat age.
const (
	StateAlive = "alive"
	StateStale = "stale"
	StateDead  = "dead"
)

type nodeKey struct{ fleet, node string }

type nodeLive struct {
	hb       wire.Heartbeat // replaced whole on each heartbeat, never mutated
	lastSeen time.Time      // on the coordinator's clock: agents' clocks drift
}

// fleetLive is one fleet's live view, guarded by Server.mu.
type fleetLive struct {
	nodes      map[string]*nodeLive
	findings   int64
	duplicates int64
	items      itemCounts // refreshed from the database once a second
	heartbeats int64
	refused    map[string]int64 // 403s by node (or "instance N" before enrolling)
	bad        map[badKey]int64 // malformed, oversized or invalid requests by node
	recent     []wire.Finding   // newest first, at most recentFindings
	subs       map[*subscriber]struct{}
	history    []HistoryPoint // oldest first, at most historyPoints
	// pushed is each node's row as the last push encoded it, and pushes
	// counts them: the next push sends only the rows that changed.
	pushed map[string][]byte
	pushes int

	costsAt            time.Time
	dph, spent         float64
	perNode            map[int64]float64
	costsRunning       bool
	costsErrLoggedOnce bool
}

func (s *Server) fleet(name string) *fleetLive {
	f := s.fleets[name]
	if f == nil {
		f = &fleetLive{nodes: map[string]*nodeLive{}, subs: map[*subscriber]struct{}{}}
		s.fleets[name] = f
	}
	return f
}

// loadLive restores the last known nodes, the findings counts and the
// newest findings, so a restarted coordinator shows where things stood.
func (s *Server) loadLive(ctx context.Context) error {
	nodes, err := s.db.loadNodes(ctx)
	if err != nil {
		return err
	}
	counts, err := s.db.findingCounts(ctx)
	if err != nil {
		return err
	}
	items, err := s.db.allItemCounts(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range nodes {
		s.fleet(n.fleet).nodes[n.hb.Node] = &nodeLive{hb: n.hb, lastSeen: n.lastSeen}
	}
	for name, c := range items {
		s.fleet(name).items = c
	}
	for name, c := range counts {
		f := s.fleet(name)
		f.findings = c
		recent, err := s.db.Findings(ctx, name, recentFindings)
		if err != nil {
			return err
		}
		slices.Reverse(recent)
		f.recent = recent
	}
	return nil
}

var errTooManyNodes = errors.New("too many nodes in this fleet")

func (s *Server) recordHeartbeat(hb *wire.Heartbeat) error {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fleet(hb.Fleet)
	n := f.nodes[hb.Node]
	if n == nil {
		if len(f.nodes) >= maxNodesPerFleet {
			return errTooManyNodes
		}
		n = &nodeLive{}
		f.nodes[hb.Node] = n
	}
	// The probe comes with the first heartbeats only: keep it.
	if hb.Probe == nil {
		hb.Probe = n.hb.Probe
	}
	n.hb, n.lastSeen = *hb, now
	f.heartbeats++
	s.dirty[nodeKey{hb.Fleet, hb.Node}] = struct{}{}
	return nil
}

// recordFindings updates the live counts after a commit.
func (s *Server) recordFindings(group []*findingsReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range group {
		f := s.fleet(r.fleet)
		f.findings += int64(r.stored)
		f.duplicates += int64(len(r.items) - r.stored)
		// Newest first by arrival; At comes from agents and may be skewed.
		added := make([]wire.Finding, 0, len(r.new))
		for j := len(r.new) - 1; j >= 0; j-- {
			added = append(added, r.items[r.new[j]])
		}
		f.recent = append(added, f.recent...)
		if len(f.recent) > recentFindings {
			f.recent = slices.Clip(f.recent[:recentFindings])
		}
	}
}

// stateOf classifies a node by how long ago it was heard from.
func (s *Server) stateOf(lastSeen, now time.Time) string {
	switch age := now.Sub(lastSeen); {
	case age <= s.cfg.StaleAfter:
		return StateAlive
	case age <= s.cfg.DeadAfter:
		return StateStale
	default:
		return StateDead
	}
}

// Snapshot is the fleet's live view: totals over alive nodes (a stale
// node's figures are old and a dead node's are gone), every known node,
// and the newest findings.
func (s *Server) Snapshot(ctx context.Context, fleet string) wire.Snapshot {
	s.refreshCosts(ctx, fleet)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := wire.Snapshot{At: now, Clock: clock.Kind(s.cfg.Clock), Totals: wire.Totals{Metrics: map[string]float64{}}, Nodes: []wire.Node{}, Findings: []wire.Finding{}}
	f := s.fleets[fleet]
	if f == nil {
		return snap
	}
	t := &snap.Totals
	gpuUtil := 0.0
	for _, n := range f.nodes {
		hb := &n.hb
		node := wire.Node{
			Fleet: fleet, Node: hb.Node, InstanceID: hb.InstanceID,
			State: s.stateOf(n.lastSeen, now), LastSeen: n.lastSeen,
			CPUPercent: hb.CPUPercent, CPUCores: hb.CPUCores,
			RAMUsedBytes: hb.RAMUsedBytes, RAMTotalBytes: hb.RAMTotalBytes,
			GPUs: hb.GPUs, Sessions: hb.Sessions, Metrics: hb.Metrics, Probe: hb.Probe, Stage: hb.Stage,
		}
		if hb.InstanceID != 0 {
			node.DPH = f.perNode[hb.InstanceID]
		}
		if node.DPH > 0 && len(hb.Metrics) > 0 {
			node.PerDPH = make(map[string]float64, len(hb.Metrics))
			for k, v := range hb.Metrics {
				node.PerDPH[k] = v / node.DPH
			}
		}
		node.Refused = f.refused[hb.Node]
		snap.Nodes = append(snap.Nodes, node)
		switch node.State {
		case StateAlive:
			t.NodesAlive++
		case StateStale:
			t.NodesStale++
			continue
		default:
			t.NodesDead++
			continue
		}
		t.CPUCores += hb.CPUCores
		t.CPUPercent += hb.CPUPercent
		t.RAMUsedBytes += hb.RAMUsedBytes
		t.RAMTotalBytes += hb.RAMTotalBytes
		t.GPUs += len(hb.GPUs)
		for _, g := range hb.GPUs {
			gpuUtil += g.UtilPercent
		}
		for k, v := range hb.Metrics {
			t.Metrics[k] += v
		}
	}
	if t.GPUs > 0 {
		t.GPUUtilAvg = gpuUtil / float64(t.GPUs)
	}
	t.Findings = f.findings
	t.ItemsDone, t.ItemsLeft, t.ItemsStarved = f.items.done, f.items.left, f.items.starved
	t.DPH, t.Spent = f.dph, f.spent
	perDPHShares(snap.Nodes)
	slices.SortFunc(snap.Nodes, func(a, b wire.Node) int { return strings.Compare(a.Node, b.Node) })
	snap.Findings = append(snap.Findings, f.recent...)
	return snap
}

// refreshCosts asks Config.Costs at most once per CostsEvery per fleet,
// outside the lock: it reads the store, which may be slow or busy.
func (s *Server) refreshCosts(ctx context.Context, fleet string) {
	if s.cfg.Costs == nil {
		return
	}
	now := s.now()
	s.mu.Lock()
	f := s.fleet(fleet)
	if f.costsRunning || (!f.costsAt.IsZero() && now.Sub(f.costsAt) < s.cfg.CostsEvery) {
		s.mu.Unlock()
		return
	}
	f.costsRunning = true
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	dph, spent, perNode, err := s.cfg.Costs(ctx, fleet)
	cancel()

	s.mu.Lock()
	defer s.mu.Unlock()
	f.costsRunning = false
	f.costsAt = now
	if err != nil {
		if !f.costsErrLoggedOnce {
			s.log.Warn("fleet costs unavailable", "fleet", fleet, "err", err)
			f.costsErrLoggedOnce = true
		}
		return
	}
	f.dph, f.spent, f.perNode = dph, spent, maps.Clone(perNode)
}

// PathHistory answers GET (viewer) with the fleet's recent totals, oldest
// first, so a dashboard opened late draws its charts at once. It lives
// here, not in package wire, as only the dashboard reads it.
const PathHistory = "/api/v1/history"

// HistoryPoint is one sample of a fleet's totals.
type HistoryPoint struct {
	At         time.Time          `json:"at"`
	NodesAlive int                `json:"nodes_alive"`
	CPUPercent float64            `json:"cpu_percent"`
	Metrics    map[string]float64 `json:"metrics"`
}

// History keeps ten minutes of samples, one per historyEvery.
const (
	historyEvery  = 5 * time.Second
	historyPoints = 120
)

// sampleHistory records every fleet's totals when historyEvery has passed
// on the coordinator's clock since the last sample.
func (s *Server) sampleHistory(ctx context.Context) {
	now := s.now()
	s.mu.Lock()
	var due []string
	for name, f := range s.fleets {
		if n := len(f.history); n == 0 || now.Sub(f.history[n-1].At) >= historyEvery {
			due = append(due, name)
		}
	}
	s.mu.Unlock()
	for _, name := range due {
		snap := s.Snapshot(ctx, name)
		p := HistoryPoint{At: snap.At, NodesAlive: snap.Totals.NodesAlive, CPUPercent: snap.Totals.CPUPercent, Metrics: snap.Totals.Metrics}
		s.mu.Lock()
		f := s.fleets[name]
		f.history = append(f.history, p)
		if len(f.history) > historyPoints {
			f.history = slices.Delete(f.history, 0, len(f.history)-historyPoints)
		}
		s.mu.Unlock()
	}
}

// History is the fleet's recent totals, oldest first.
func (s *Server) History(fleet string) []HistoryPoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []HistoryPoint{}
	if f := s.fleets[fleet]; f != nil {
		out = append(out, f.history...)
	}
	return out
}

// perDPHShares sets each alive node's delivery per $/hr as a share of the
// median alive node's, metric by metric: the figure a cull decides on.
func perDPHShares(nodes []wire.Node) {
	byMetric := map[string][]float64{}
	for _, n := range nodes {
		if n.State != StateAlive {
			continue
		}
		for k, v := range n.PerDPH {
			byMetric[k] = append(byMetric[k], v)
		}
	}
	medians := make(map[string]float64, len(byMetric))
	for k, vs := range byMetric {
		medians[k] = stat.Median(vs)
	}
	for i := range nodes {
		n := &nodes[i]
		if n.State != StateAlive {
			continue
		}
		for k, v := range n.PerDPH {
			if med := medians[k]; med > 0 {
				if n.PerDPHShare == nil {
					n.PerDPHShare = map[string]float64{}
				}
				// Two decimals: a share that moves in the third would
				// resend every row to every dashboard each second.
				n.PerDPHShare[k] = math.Round(100*v/med) / 100
			}
		}
	}
}
