package coord

import (
	"context"
	"maps"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// fleetCollector reads a fleet's live totals at scrape time. Each fleet has
// its own private registry, as a viewer token sees one fleet only.
type fleetCollector struct {
	s     *Server
	fleet string
}

var (
	labelsFleet = []string{"fleet"}
	descNodes   = prometheus.NewDesc("vastfleet_nodes", "Nodes by heartbeat state.", []string{"fleet", "state"}, nil)
	descCPU     = prometheus.NewDesc("vastfleet_cpu_percent", "CPU use summed over the cores of alive nodes (100 per busy core).", labelsFleet, nil)
	descCores   = prometheus.NewDesc("vastfleet_cpu_cores", "vCPUs of alive nodes.", labelsFleet, nil)
	descRAMUsed = prometheus.NewDesc("vastfleet_ram_used_bytes", "RAM used on alive nodes.", labelsFleet, nil)
	descRAMTot  = prometheus.NewDesc("vastfleet_ram_total_bytes", "RAM of alive nodes.", labelsFleet, nil)
	descGPUs    = prometheus.NewDesc("vastfleet_gpus", "GPUs on alive nodes.", labelsFleet, nil)
	descGPUUtil = prometheus.NewDesc("vastfleet_gpu_util_percent", "Mean GPU utilisation on alive nodes.", labelsFleet, nil)
	descFinds   = prometheus.NewDesc("vastfleet_findings_total", "Distinct findings stored.", labelsFleet, nil)
	descDups    = prometheus.NewDesc("vastfleet_findings_duplicates_total", "Findings received again and not stored twice, since the coordinator started.", labelsFleet, nil)
	descBeats   = prometheus.NewDesc("vastfleet_heartbeats_total", "Heartbeats received since the coordinator started.", labelsFleet, nil)
	descMetric  = prometheus.NewDesc("vastfleet_metric", "A custom session metric summed over alive nodes.", []string{"fleet", "name"}, nil)
	descDPH     = prometheus.NewDesc("vastfleet_dollars_per_hour", "What the fleet costs per hour now.", labelsFleet, nil)
	descSpent   = prometheus.NewDesc("vastfleet_spent_dollars", "What the fleet has cost so far.", labelsFleet, nil)
	descRefused = prometheus.NewDesc("vastfleet_refused_total", "Requests answered 403 since the coordinator started, by the node (or enrolling instance) that sent them: another node's name, a result for an item it does not hold.", []string{"fleet", "node"}, nil)
	descBad     = prometheus.NewDesc("vastfleet_bad_requests_total", "Requests refused as bad input since the coordinator started (400 or 413), by the node that sent them and what was wrong: malformed, oversized or invalid.", []string{"fleet", "node", "reason"}, nil)
	descReplays = prometheus.NewDesc("vastfleet_result_replays_total", "Item results acknowledged but not stored since the coordinator started, by node: sent again, or for a lease lost meanwhile.", []string{"fleet", "node"}, nil)
	descResults = prometheus.NewDesc("vastfleet_item_results", "Item results by validation verdict (validated, rejected, unchecked).", []string{"fleet", "verdict"}, nil)
)

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNodes, descCPU, descCores, descRAMUsed, descRAMTot, descGPUs,
		descGPUUtil, descFinds, descDups, descBeats, descMetric, descDPH, descSpent, descRefused, descBad, descReplays, descResults} {
		ch <- d
	}
}

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	snap := c.s.Snapshot(ctx, c.fleet)
	cancel()
	c.s.mu.Lock()
	var beats, dups int64
	refused, bad := map[string]int64{}, map[badKey]int64{}
	if f := c.s.fleets[c.fleet]; f != nil {
		beats, dups = f.heartbeats, f.duplicates
		maps.Copy(refused, f.refused)
		maps.Copy(bad, f.bad)
	}
	c.s.mu.Unlock()
	for node, n := range refused {
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(n), c.fleet, node)
	}
	for k, n := range bad {
		if k.reason == badReplay {
			ch <- prometheus.MustNewConstMetric(descReplays, prometheus.CounterValue, float64(n), c.fleet, k.who)
			continue
		}
		ch <- prometheus.MustNewConstMetric(descBad, prometheus.CounterValue, float64(n), c.fleet, k.who, k.reason)
	}
	vctx, vcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer vcancel()
	if v, err := c.s.db.verdictCounts(vctx, c.fleet); err == nil {
		for verdict, n := range v {
			ch <- prometheus.MustNewConstMetric(descResults, prometheus.GaugeValue, float64(n), c.fleet, verdict)
		}
	}
	t := snap.Totals
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{c.fleet}, labels...)...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, c.fleet)
	}
	gauge(descNodes, float64(t.NodesAlive), StateAlive)
	gauge(descNodes, float64(t.NodesStale), StateStale)
	gauge(descNodes, float64(t.NodesDead), StateDead)
	gauge(descCPU, t.CPUPercent)
	gauge(descCores, t.CPUCores)
	gauge(descRAMUsed, float64(t.RAMUsedBytes))
	gauge(descRAMTot, float64(t.RAMTotalBytes))
	gauge(descGPUs, float64(t.GPUs))
	gauge(descGPUUtil, t.GPUUtilAvg)
	counter(descFinds, float64(t.Findings))
	counter(descDups, float64(dups))
	counter(descBeats, float64(beats))
	for name, v := range t.Metrics {
		gauge(descMetric, v, name)
	}
	if c.s.cfg.Costs != nil {
		gauge(descDPH, t.DPH)
		gauge(descSpent, t.Spent)
	}
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, c caller) {
	s.metricsMu.Lock()
	h := s.metrics[c.fleet]
	if h == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(fleetCollector{s: s, fleet: c.fleet})
		h = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
		s.metrics[c.fleet] = h
	}
	s.metricsMu.Unlock()
	h.ServeHTTP(w, r)
}
