package job

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/bill"
	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// EventLine is an event as a log line, "" for one that has none
// (Progress has its own, Line).
func EventLine(e Event) string {
	switch e := e.(type) {
	case Dashboard:
		return "dashboard " + e.URL
	case LaunchResumed:
		return "its launch was cut off; resuming it within its deadline"
	case Launched:
		return fmt.Sprintf("%d of %d nodes ready at $%.3f/hr (%d rented, %d failed)", e.Ready, e.Asked, e.DPH, e.Rented, e.Failed)
	case StepFailed:
		return fmt.Sprintf("%s failed on %s (instance %d): %s; it is left out of the run", e.Step, e.Node, e.ID, termsafe.Line(e.Why))
	case Synced:
		return fmt.Sprintf("synced %s (%d files, %d bytes sent) to %d node(s)", e.Dir, e.Files, e.Sent, e.Nodes)
	case SetupDone:
		return fmt.Sprintf("setup %d/%d done on %d node(s): %s", e.Index, e.Of, e.Nodes, termsafe.Line(e.Command))
	case Started:
		if e.Clock == clock.KindMarket {
			return fmt.Sprintf("started on %d node(s); times are the simulated market's clock", e.Nodes)
		}
		return fmt.Sprintf("started on %d node(s)", e.Nodes)
	case Resumed:
		return fmt.Sprintf("resumed with %d of %d node(s) still running", e.Running, e.Of)
	case Cull:
		return e.Line()
	case CullUnjudged:
		return "cull judges no node: " + e.Why
	case Released:
		return fmt.Sprintf("released %d node(s) whose run exited: %v", len(e.IDs), e.IDs)
	case ReplacedNode:
		return fmt.Sprintf("culled instance %d: %s", e.Culled, termsafe.Line(e.Line()))
	}
	return finishEventLine(e)
}

// finishEventLine is an event of a job's end as a line, "" for one that
// has none.
func finishEventLine(e Event) string {
	switch e := e.(type) {
	case Ended:
		return e.Why
	case CollectMissed:
		return fmt.Sprintf("collecting from instance %d: %s", e.ID, termsafe.Line(e.Why))
	case Collected:
		return fmt.Sprintf("collected %d file(s) from %d node(s) into %s", e.Files, e.Nodes, e.Dir)
	case ResultsWritten:
		return fmt.Sprintf("%d %s(s) in %s", e.Count, e.Kind, e.Path)
	case Destroyed:
		return fmt.Sprintf("destroyed %d instance(s)", e.Count)
	case KeptRunning:
		if e.Interrupted {
			return fmt.Sprintf("the nodes keep running (and billing); `vastfleet down %s` collects, destroys and reports", e.Job)
		}
		return fmt.Sprintf("auto_destroy is false: the nodes keep running; `vastfleet down %s` ends them", e.Job)
	}
	return ""
}

// Line is the run's progress as a status line.
func (p Progress) Line() string {
	t := p.Totals
	items := ""
	if t.ItemsDone+t.ItemsLeft > 0 {
		items = fmt.Sprintf("items %d/%d %s  ", t.ItemsDone, t.ItemsDone+t.ItemsLeft, ItemsETA(t.ItemsDone, t.ItemsLeft, p.Elapsed))
	}
	return fmt.Sprintf("nodes %d alive %d stale %d dead  run exited %d/%d  %sfindings %d  %s$%.3f/hr  $%.2f spent  %s",
		t.NodesAlive, t.NodesStale, t.NodesDead, p.Ended, p.Nodes, items, t.Findings, metricText(t.Metrics), t.DPH, t.Spent, p.Elapsed.Round(time.Second))
}

func metricText(m map[string]float64) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s %s  ", k, humanNumber(m[k]))
	}
	return b.String()
}

func humanNumber(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// writeDelivery says how many items a dollar bought on the instances
// that delivered any: the median, the best and the worst instance, and
// each hardware model's median when there are several.
func writeDelivery(w io.Writer, d *Delivery) {
	if d == nil {
		return
	}
	fmt.Fprintf(w, "  per dollar %.1f items per dollar on the median instance; best %.1f (instance %d), worst %.1f (instance %d)\n",
		d.MedianItemsPerDollar, d.Best.ItemsPerDollar, d.Best.ID, d.Worst.ItemsPerDollar, d.Worst.ID)
	if len(d.ByModel) < 2 {
		return
	}
	for _, m := range d.ByModel {
		if m.Instances == 1 {
			fmt.Fprintf(w, "    %s: %.1f items per dollar (1 instance)\n", termsafe.Line(m.Model), m.MedianItemsPerDollar)
			continue
		}
		fmt.Fprintf(w, "    %s: %.1f items per dollar (median of %d instances)\n", termsafe.Line(m.Model), m.MedianItemsPerDollar, m.Instances)
	}
}

// StatusHeader names the columns of Status.Cells.
var StatusHeader = []string{"JOB", "STATE", "STARTED", "LIVE", "$/HR", "SPENT", "ESTIMATE", "DELIVERED"}

// Cells is the job's row of status's table.
func (s Status) Cells() []string {
	return []string{s.ID, s.StateText(), s.Started, strconv.Itoa(s.Live), fmt.Sprintf("%.3f", s.DPH), bill.Dollars(s.Spent), bill.Dollars(s.Estimate), s.Delivered()}
}

// StateText is the job's state, with how to go on for one cut off.
func (s Status) StateText() string {
	if s.CutOff() {
		return s.State + ", cut off: up --resume " + s.ID
	}
	return s.State
}

// Delivered is what a job delivers for its money: work items per dollar
// spent, and its metrics per $/hr, by name, with how many of its live
// nodes reported them; "-" for none.
func (s Status) Delivered() string {
	var parts []string
	if s.ItemsPerDollar > 0 {
		parts = append(parts, fmt.Sprintf("%d items, %.1f per $", s.ItemsDone, s.ItemsPerDollar))
	}
	for _, k := range slices.Sorted(maps.Keys(s.MetricsPerDPH)) {
		parts = append(parts, fmt.Sprintf("%s %.4g", termsafe.Line(k), s.MetricsPerDPH[k]))
	}
	switch {
	case len(parts) == 0:
		return "-"
	case len(s.MetricsPerDPH) > 0:
		return fmt.Sprintf("%s (%d of %d nodes)", strings.Join(parts, ", "), s.Reporting, s.Live)
	}
	return parts[0]
}

// WriteLogs writes each node's logs under its name, line by line: a log
// may hold any bytes, but not ones that drive a terminal.
func WriteLogs(w io.Writer, all []NodeLog) {
	for _, l := range all {
		fmt.Fprintf(w, "==> %s (instance %d, %s log) <==\n", l.Node, l.ID, l.Source)
		if l.Error != "" {
			fmt.Fprintf(w, "(%s)\n", termsafe.Line(l.Error))
		}
		for _, line := range strings.SplitAfter(l.Log, "\n") {
			if line = strings.TrimSuffix(line, "\n"); line != "" {
				fmt.Fprintln(w, termsafe.Text(line))
			}
		}
	}
}

// nodesListed is how many instances a report lists one by one; past it,
// `vastfleet cost --fleet` does.
const nodesListed = 12

// NodeTable is the report's table of its instances, nil when it has too
// many to list.
func (rep *Report) NodeTable() (cols []string, rows [][]string) {
	if len(rep.Nodes) > nodesListed {
		return nil, nil
	}
	items := rep.ItemsDone+rep.ItemsLeft > 0
	cols = []string{"INSTANCE", "RAN", "STATE", "RUNNING", "COMPUTE", "STORAGE", "BANDWIDTH", "TOTAL"}
	if items {
		cols = append(cols, "ITEMS", "ITEMS/$")
	}
	for _, n := range rep.Nodes {
		row := []string{strconv.FormatInt(n.ID, 10), map[bool]string{true: "yes", false: "no"}[n.Ran], n.State,
			(time.Duration(n.Running) * time.Second).String(), bill.Dollars(n.Compute), bill.Dollars(n.Storage), bill.Dollars(n.Bandwidth), bill.Dollars(n.Total)}
		if items {
			row = append(row, strconv.Itoa(n.ItemsDone), fmt.Sprintf("%.1f", n.ItemsPerDollar))
		}
		rows = append(rows, row)
	}
	return cols, rows
}

// HostTable is the report's table of each host's results by verdict.
func (rep *Report) HostTable() (cols []string, rows [][]string) {
	for _, h := range rep.Hosts {
		rows = append(rows, []string{h.Host, strconv.Itoa(h.Validated), strconv.Itoa(h.Rejected), strconv.Itoa(h.Unchecked), h.Caught})
	}
	return []string{"HOST", "VALIDATED", "REJECTED", "UNCHECKED", "BAD HOST"}, rows
}

// WriteTotals writes the report's sums: what each kind of charge came
// to, the waste, the total against the estimate and the marketplace's
// charges, the findings and the items.
func (rep *Report) WriteTotals(w io.Writer) {
	fmt.Fprintf(w, "  compute    %s\n  storage    %s\n  bandwidth  %s\n", bill.Dollars(rep.Compute), bill.Dollars(rep.Storage), bill.Dollars(rep.Bandwidth))
	fmt.Fprintf(w, "  failed-launch waste %s (instances that never ran the job: %d of %d)\n", bill.Dollars(rep.Waste), len(rep.Nodes)-rep.Ran, len(rep.Nodes))
	fmt.Fprintf(w, "  total      %s", bill.Dollars(rep.Total))
	if rep.Estimate > 0 {
		fmt.Fprintf(w, " against an estimate of %s (%s)", bill.Dollars(rep.Estimate), rep.EstimateOf)
	}
	fmt.Fprintln(w)
	if r := rep.Reconcile; r != nil {
		fmt.Fprintf(w, "  charged    %s by the marketplace (difference %s; %d of %d instances differ by a cent or more; per line: `vastfleet cost --reconcile --job %s`)\n",
			bill.Dollars4(r.Total.Charged), bill.Signed4(r.Total.Difference), r.Disagree, len(r.Instances), rep.Job)
	} else if rep.ReconcileError != "" {
		fmt.Fprintf(w, "  charged    unknown: %s\n", termsafe.Line(rep.ReconcileError))
	}
	fmt.Fprintf(w, "  findings   %d\n", rep.Findings)
	if rep.ItemsDone+rep.ItemsLeft > 0 {
		fmt.Fprintf(w, "  items      %d done (%d failed), %d left\n", rep.ItemsDone, rep.ItemsFailed, rep.ItemsLeft)
		writeDelivery(w, rep.Delivery)
	}
	for _, k := range rep.Culls {
		fmt.Fprintf(w, "  %s\n", k.Line())
	}
}

// Line is a cull in words, with the figures it was judged on.
func (k Cull) Line() string {
	var s string
	if k.Reports == 0 {
		s = fmt.Sprintf("culled instance %d (machine %d): no report of %s in %s at $%.3f/hr, while the run's median node delivered %.4g per $/hr",
			k.ID, k.MachineID, termsafe.Line(k.Metric), k.Over.Round(time.Second), k.DPH, k.Median)
	} else {
		s = fmt.Sprintf("culled instance %d (machine %d): %s %.4g at $%.3f/hr is %.4g per $/hr, %.0f%% of the run's median %.4g (cull below %.0f%%, over %s of reports)",
			k.ID, k.MachineID, termsafe.Line(k.Metric), k.Mean, k.DPH, k.PerDPH, 100*k.Share, k.Median, 100*k.Below, k.Over.Round(time.Second))
	}
	if k.Error != "" {
		s += "; " + termsafe.Line(k.Error)
	}
	if k.Replacement != nil {
		s += "; " + termsafe.Line(k.Replacement.Line())
	}
	return s
}
