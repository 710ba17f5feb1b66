package job

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/bill"
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Report is a job's cost, per node and in all, against the estimate.
type Report struct {
	Job       string       `json:"job"`
	At        time.Time    `json:"at"`
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
	ItemsDone   int    `json:"items_done"`
	ItemsFailed int    `json:"items_failed"`
	ItemsLeft   int    `json:"items_left"`
	Live        int    `json:"instances_live"`
	Dashboard   string `json:"dashboard,omitempty"`
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
	rep := &Report{Job: rec.ID, At: cr.At, Estimate: rec.Estimate, EstimateOf: rec.EstimateOf, Dashboard: rec.Dashboard}
	for _, in := range cr.Instances {
		n := ReportNode{ID: in.InstanceID, Ran: ran[in.InstanceID], State: in.State, Running: in.Running.Seconds(),
			Compute: in.Compute, Storage: in.Storage, Bandwidth: in.Bandwidth, Total: in.Total}
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
