package job

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/bill"
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/stat"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Report is a job's cost, per node and in all, against the estimate.
type Report struct {
	Job string    `json:"job"`
	At  time.Time `json:"at"`
	// Clock names the time At is in: "wall", or "market" on a simulated
	// market.
	Clock     string       `json:"clock"`
	Nodes     []ReportNode `json:"nodes"`
	Ran       int          `json:"nodes_ran"`
	Compute   float64      `json:"compute"`
	Storage   float64      `json:"storage"`
	Bandwidth float64      `json:"bandwidth"`
	// Waste is what instances that never ran the job cost: failed
	// boots, surplus spares, replaced nodes.
	Waste      float64 `json:"failed_launch_waste"`
	Total      float64 `json:"total"`
	Estimate   float64 `json:"estimate"`
	EstimateOf string  `json:"estimate_of"`
	Findings   int64   `json:"findings"`
	// Work items: done (a result recorded once each), of which failed
	// (non-zero exit), and left (never finished: queued or leased).
	ItemsDone   int `json:"items_done"`
	ItemsFailed int `json:"items_failed"`
	ItemsLeft   int `json:"items_left"`
	// Delivery is what a dollar bought on the instances that delivered
	// items; nil when none did.
	Delivery *Delivery `json:"delivery,omitempty"`
	// Culls are the nodes the cull policy destroyed during the run, with
	// the figures each was judged on.
	Culls []Cull `json:"culls,omitempty"`
	// Ended is why the run ended: the nodes that stopped reporting, or
	// were never heard from, are named.
	Ended     string `json:"ended,omitempty"`
	Live      int    `json:"instances_live"`
	Dashboard string `json:"dashboard,omitempty"`
	// Hosts are each host's results by verdict, when the job validates.
	Hosts []coord.HostResults `json:"hosts,omitempty"`
	// Reconcile holds this cost up against the marketplace's charges,
	// where the marketplace serves them; ReconcileError says why it could
	// not (the cost report stands without it).
	Reconcile      *bill.Report `json:"reconcile,omitempty"`
	ReconcileError string       `json:"reconcile_error,omitempty"`
}

// ReportNode is one instance's part of the report.
type ReportNode struct {
	ID        int64   `json:"id"`
	Ran       bool    `json:"ran"`
	State     string  `json:"state"`
	Running   float64 `json:"running_seconds"`
	Compute   float64 `json:"compute"`
	Storage   float64 `json:"storage"`
	Bandwidth float64 `json:"bandwidth"`
	Total     float64 `json:"total"`
	// ItemsDone counts the work items whose kept result this instance
	// sent with exit 0 (a failed item delivered nothing);
	// ItemsPerDollar is that over its total cost (0 when it cost
	// nothing or the job has no items).
	ItemsDone      int     `json:"items_done"`
	ItemsPerDollar float64 `json:"items_per_dollar"`
	// LastMetrics are the metrics the instance last reported: for a
	// counter (the demo's hashes) what it delivered in all.
	LastMetrics map[string]float64 `json:"last_metrics,omitempty"`
	// Model is the instance's hardware: its GPUs ("2x RTX 4090"), or
	// what the store knows of it when it has none (see hardwareModel).
	Model string `json:"model"`
}

// Delivery sums up items per dollar over the instances that delivered
// any items (ItemsDone > 0) and cost something (Total > 0): the median,
// best and worst instance, and the same per hardware model.
type Delivery struct {
	Instances            int          `json:"instances"`
	MedianItemsPerDollar float64      `json:"median_items_per_dollar"`
	Best                 DeliveryNode `json:"best"`
	Worst                DeliveryNode `json:"worst"`
	// ByModel has one row per hardware model, the best median first.
	ByModel []ModelDelivery `json:"by_model"`
}

// DeliveryNode is one instance's items per dollar.
type DeliveryNode struct {
	ID             int64   `json:"id"`
	ItemsPerDollar float64 `json:"items_per_dollar"`
	Model          string  `json:"model"`
}

// ModelDelivery is the delivery of the instances of one hardware model.
type ModelDelivery struct {
	Model                string  `json:"model"`
	Instances            int     `json:"instances"`
	MedianItemsPerDollar float64 `json:"median_items_per_dollar"`
	ItemsDone            int     `json:"items_done"`
	Cost                 float64 `json:"cost"`
}

// unknownModel is the model of an instance the store knows nothing of.
const unknownModel = "unknown"

// delivery sums up the nodes that delivered items for money; nil when
// none did. Of instances tied on items per dollar, the lowest id is
// named best or worst; models tied on their median come by name.
func delivery(nodes []ReportNode) *Delivery {
	var d Delivery
	var all []float64
	perModel := map[string][]float64{}
	rows := map[string]*ModelDelivery{}
	for _, n := range nodes {
		if n.ItemsDone <= 0 || n.Total <= 0 {
			continue
		}
		model := n.Model
		if model == "" {
			model = unknownModel
		}
		dn := DeliveryNode{ID: n.ID, ItemsPerDollar: n.ItemsPerDollar, Model: model}
		if d.Instances == 0 || outranks(dn, d.Best, +1) {
			d.Best = dn
		}
		if d.Instances == 0 || outranks(dn, d.Worst, -1) {
			d.Worst = dn
		}
		d.Instances++
		all = append(all, n.ItemsPerDollar)
		perModel[model] = append(perModel[model], n.ItemsPerDollar)
		r := rows[model]
		if r == nil {
			r = &ModelDelivery{Model: model}
			rows[model] = r
		}
		r.Instances++
		r.ItemsDone += n.ItemsDone
		r.Cost += n.Total
	}
	if d.Instances == 0 {
		return nil
	}
	d.MedianItemsPerDollar = stat.Median(all)
	d.ByModel = make([]ModelDelivery, 0, len(rows))
	for model, r := range rows {
		r.MedianItemsPerDollar = stat.Median(perModel[model])
		d.ByModel = append(d.ByModel, *r)
	}
	slices.SortFunc(d.ByModel, func(a, b ModelDelivery) int {
		return cmp.Or(cmp.Compare(b.MedianItemsPerDollar, a.MedianItemsPerDollar), strings.Compare(a.Model, b.Model))
	})
	return &d
}

// outranks reports whether a should be named instead of b: it delivered
// more per dollar (sign +1, for the best) or less (sign -1, for the
// worst), or as much with a lower id.
func outranks(a, b DeliveryNode, sign int) bool {
	if c := sign * cmp.Compare(a.ItemsPerDollar, b.ItemsPerDollar); c != 0 {
		return c > 0
	}
	return a.ID < b.ID
}

// hardwareModel names an instance's hardware for grouping: "2x RTX 4090"
// when it has GPUs. The store records no CPU name, so an instance without
// GPUs is named by its vCPUs ("32 vCPU"); "unknown" when nothing is known.
func hardwareModel(in store.Instance) string {
	switch {
	case in.GPUName != "" && in.NumGPUs > 0:
		return fmt.Sprintf("%dx %s", in.NumGPUs, in.GPUName)
	case in.GPUName != "":
		return in.GPUName
	case in.CPUCores > 0:
		return strconv.FormatFloat(in.CPUCores, 'f', -1, 64) + " vCPU"
	}
	return unknownModel
}

// report is the job's cost report as of now, also written to
// jobs/<job>/report.json.
func report(ctx context.Context, d *Deps, rec *Record) (*Report, error) {
	cr, err := d.Fleet.Cost(ctx, rec.ID)
	if err != nil {
		return nil, err
	}
	ran := map[int64]bool{}
	for _, id := range rec.RunIDs {
		ran[id] = true
	}
	ins, err := d.Store.Instances(ctx, store.InstanceFilter{Fleet: rec.ID, IncludeGone: true})
	if err != nil {
		return nil, err
	}
	models := make(map[int64]string, len(ins))
	for _, in := range ins {
		models[in.ID] = hardwareModel(in)
	}
	rep := &Report{Job: rec.ID, At: cr.At, Clock: cr.Clock, Estimate: rec.Estimate, EstimateOf: rec.EstimateOf, Dashboard: rec.Dashboard,
		Culls: rec.Culls, Ended: rec.Ended}
	for _, in := range cr.Instances {
		n := ReportNode{ID: in.InstanceID, Ran: ran[in.InstanceID], State: in.State, Running: in.Running.Seconds(),
			Compute: in.Compute, Storage: in.Storage, Bandwidth: in.Bandwidth, Total: in.Total, Model: models[in.InstanceID]}
		if !in.Live {
			n.State = "destroyed"
		}
		rep.add(n, in.Live)
	}
	if _, ok := d.Fleet.P.(provider.Charger); ok {
		if r, err := bill.Reconcile(ctx, d.Fleet, rec.ID); errors.Is(err, bill.ErrNoInstances) {
			// A job killed before it rented anything: nothing to bill.
			rep.Reconcile = &bill.Report{At: cr.At, Fleet: rec.ID, Instances: []bill.Instance{}}
		} else if err != nil {
			rep.ReconcileError = err.Error()
		} else {
			rep.Reconcile = &r
		}
	}
	var errs []error
	if d.Results != nil {
		errs = append(errs, countResults(ctx, d.Results, rep))
	}
	rep.Delivery = delivery(rep.Nodes)
	dir, err := d.Records.JobDir(rec.ID)
	if err == nil {
		b, _ := json.MarshalIndent(rep, "", "  ")
		err = atomicfile.WriteFile(filepath.Join(dir, "report.json"), b, 0o600)
	}
	return rep, errors.Join(append(errs, err)...)
}

func (rep *Report) add(n ReportNode, live bool) {
	rep.Nodes = append(rep.Nodes, n)
	rep.Compute += n.Compute
	rep.Storage += n.Storage
	rep.Bandwidth += n.Bandwidth
	rep.Total += n.Total
	if n.Ran {
		rep.Ran++
	} else {
		rep.Waste += n.Total
	}
	if live {
		rep.Live++
	}
}

// countResults puts the coordinator's counts of findings and items in rep.
func countResults(ctx context.Context, r Results, rep *Report) error {
	n, err := r.CountFindings(ctx, rep.Job)
	if err != nil {
		return err
	}
	rep.Findings = n
	queued, leased, _, err := r.ItemCounts(ctx, rep.Job)
	if err != nil {
		return err
	}
	rep.ItemsLeft = queued + leased
	results, err := r.ItemResults(ctx, rep.Job)
	if err != nil {
		return err
	}
	if last, err := r.LastMetrics(ctx, rep.Job); err == nil {
		for i := range rep.Nodes {
			rep.Nodes[i].LastMetrics = last[rep.Nodes[i].ID].Metrics
		}
	}
	rep.ItemsDone = len(results)
	for _, r := range results {
		if r.ExitCode != 0 {
			rep.ItemsFailed++
		}
	}
	if ni, ok := r.(NodeInstances); ok && len(results) > 0 {
		if err := rep.itemsPerNode(ctx, ni, results); err != nil {
			return err
		}
	}
	if v, ok := r.(Verdicts); ok {
		if val, err := v.FleetValidation(ctx, rep.Job); err == nil && val != (coord.Validation{}) {
			if rep.Hosts, err = v.HostResults(ctx, rep.Job); err != nil {
				return err
			}
		}
	}
	return nil
}

// NodeInstances is what a coordinator's database that issues
// per-instance credentials adds: which instance each node name is.
type NodeInstances interface {
	NodeInstances(ctx context.Context, fleet string) (map[string]int64, error)
}

// itemsPerNode credits each kept item result to the instance that sent
// it, and gives each instance's items per dollar: what it delivered for
// the money, the figure to judge machines by.
func (rep *Report) itemsPerNode(ctx context.Context, ni NodeInstances, results []coord.ItemResult) error {
	ids, err := ni.NodeInstances(ctx, rep.Job)
	if err != nil {
		return err
	}
	done := map[int64]int{}
	for _, r := range results {
		if id, ok := ids[r.Node]; ok && r.ExitCode == 0 {
			done[id]++
		}
	}
	for i := range rep.Nodes {
		n := &rep.Nodes[i]
		n.ItemsDone = done[n.ID]
		if n.Total > 0 {
			n.ItemsPerDollar = float64(n.ItemsDone) / n.Total
		}
	}
	return nil
}

// Verdicts is what a coordinator's database that validates results adds:
// the job's validation and each host's results by verdict.
type Verdicts interface {
	FleetValidation(ctx context.Context, fleet string) (coord.Validation, error)
	HostResults(ctx context.Context, fleet string) ([]coord.HostResults, error)
}

// SavedReport is the cost report the job wrote when it last finished.
func SavedReport(recs *Records, id string) (*Report, bool) {
	b, err := os.ReadFile(filepath.Join(recs.Dir, id, "report.json"))
	if err != nil {
		return nil, false
	}
	var rep Report
	if json.Unmarshal(b, &rep) != nil {
		return nil, false
	}
	if rep.Delivery == nil {
		// Written before reports carried it: the nodes still tell.
		rep.Delivery = delivery(rep.Nodes)
	}
	return &rep, true
}

// writeFindings writes every finding the coordinator holds to
// LOCAL/findings.jsonl, oldest first.
func writeFindings(ctx context.Context, r Results, rec *Record) (int, error) {
	total, err := r.CountFindings(ctx, rec.ID)
	if err != nil || total == 0 {
		return 0, err
	}
	all, err := r.Findings(ctx, rec.ID, int(total))
	if err != nil {
		return 0, err
	}
	var b strings.Builder
	for i := len(all) - 1; i >= 0; i-- {
		line, _ := json.Marshal(all[i])
		b.Write(line)
		b.WriteByte('\n')
	}
	return len(all), writeLocal(rec.LocalDir, "findings.jsonl", b.String())
}

// ItemLine is one work item's recorded result in items.jsonl.
type ItemLine struct {
	ID         int64         `json:"id"`
	Value      string        `json:"value"`
	ExitCode   int           `json:"exit_code"`
	Node       string        `json:"node"`
	StdoutTail string        `json:"stdout_tail"`
	Outputs    []wire.Output `json:"outputs,omitempty"`
	DoneAt     time.Time     `json:"done_at"`
}

// writeItemResults writes every item's one recorded result to
// LOCAL/items.jsonl, by item id.
func writeItemResults(ctx context.Context, r Results, rec *Record) (int, error) {
	results, err := r.ItemResults(ctx, rec.ID)
	if err != nil || len(results) == 0 {
		return 0, err
	}
	var b strings.Builder
	for _, r := range results {
		line, _ := json.Marshal(ItemLine{ID: r.ID, Value: r.Value, ExitCode: r.ExitCode, Node: r.Node,
			StdoutTail: r.StdoutTail, Outputs: r.Outputs, DoneAt: r.DoneAt})
		b.Write(line)
		b.WriteByte('\n')
	}
	return len(results), writeLocal(rec.LocalDir, "items.jsonl", b.String())
}

func writeLocal(dir, name, text string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)
}
