package cli

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/liveview"
)

// jobView renders a job's events: the live view on a terminal, else log
// lines (the run's progress every five seconds of wall time, stamped in
// the market's).
type jobView struct {
	f        *factory
	json     bool
	opened   bool
	live     *liveview.View
	lastLine time.Time
}

func newJobView(f *factory, asJSON bool) *jobView { return &jobView{f: f, json: asJSON} }

func (v *jobView) close() {
	v.live.Close()
	v.live = nil
}

func (v *jobView) event(e job.Event) {
	if p, ok := e.(job.Progress); ok {
		v.progress(p)
		return
	}
	if _, ok := e.(job.Ended); ok {
		v.close() // what follows may ask a question
	}
	if line := jobEventLine(e); line != "" {
		fmt.Fprintf(v.f.io.ErrOut, "job %s: %s\n", e.JobID(), line)
	}
}

// jobEventLine is an event as a line, "" for one that has none.
func jobEventLine(e job.Event) string {
	switch e := e.(type) {
	case job.Dashboard:
		return "dashboard " + e.URL
	case job.LaunchResumed:
		return "its launch was cut off; resuming it within its deadline"
	case job.Launched:
		return fmt.Sprintf("%d of %d nodes ready at $%.3f/hr (%d rented, %d failed)", e.Ready, e.Asked, e.DPH, e.Rented, e.Failed)
	case job.StepFailed:
		return fmt.Sprintf("%s failed on %s (instance %d): %s; it is left out of the run", e.Step, e.Node, e.ID, termSafe(e.Why))
	case job.Synced:
		return fmt.Sprintf("synced %s (%d files, %d bytes sent) to %d node(s)", e.Dir, e.Files, e.Sent, e.Nodes)
	case job.SetupDone:
		return fmt.Sprintf("setup %d/%d done on %d node(s): %s", e.Index, e.Of, e.Nodes, termSafe(e.Command))
	case job.Started:
		return fmt.Sprintf("started on %d node(s)", e.Nodes)
	case job.Resumed:
		return fmt.Sprintf("resumed with %d of %d node(s) still running", e.Running, e.Of)
	}
	return finishEventLine(e)
}

// finishEventLine is an event of a job's end as a line, "" for one that
// has none.
func finishEventLine(e job.Event) string {
	switch e := e.(type) {
	case job.Ended:
		return e.Why
	case job.CollectMissed:
		return fmt.Sprintf("collecting from instance %d: %s", e.ID, termSafe(e.Why))
	case job.Collected:
		return fmt.Sprintf("collected %d file(s) from %d node(s) into %s", e.Files, e.Nodes, e.Dir)
	case job.ResultsWritten:
		return fmt.Sprintf("%d %s(s) in %s", e.Count, e.Kind, e.Path)
	case job.Destroyed:
		return fmt.Sprintf("destroyed %d instance(s)", e.Count)
	case job.KeptRunning:
		if e.Interrupted {
			return fmt.Sprintf("the nodes keep running (and billing); `vastfleet down %s` collects, destroys and reports", e.Job)
		}
		return fmt.Sprintf("auto_destroy is false: the nodes keep running; `vastfleet down %s` ends them", e.Job)
	}
	return ""
}

// progress shows the run: on the live view, or a line every 5 s.
func (v *jobView) progress(p job.Progress) {
	if !v.opened && !v.json {
		v.opened = true
		v.live = liveview.Open(&v.f.io.ErrOut, v.f.io.ErrTTY, "job "+p.Job)
	}
	t := p.Totals
	items := ""
	if t.ItemsDone+t.ItemsLeft > 0 {
		items = fmt.Sprintf("items %d/%d %s  ", t.ItemsDone, t.ItemsDone+t.ItemsLeft, job.ItemsETA(t.ItemsDone, t.ItemsLeft, p.Elapsed))
	}
	line := fmt.Sprintf("nodes %d alive %d stale %d dead  run exited %d/%d  %sfindings %d  %s$%.3f/hr  $%.2f spent  %s",
		t.NodesAlive, t.NodesStale, t.NodesDead, p.Ended, p.Nodes, items, t.Findings, metricText(t.Metrics), t.DPH, t.Spent, p.Elapsed.Round(time.Second))
	switch {
	case v.live != nil && t.ItemsDone+t.ItemsLeft > 0:
		v.live.Update(t.ItemsDone, t.ItemsDone+t.ItemsLeft, "items  "+line)
	case v.live != nil:
		v.live.Update(int64(p.Ended), int64(p.Nodes), "run exited  "+line)
	case time.Since(v.lastLine) >= 5*time.Second:
		v.lastLine = time.Now()
		fmt.Fprintf(v.f.io.ErrOut, "%s job %s: %s\n", p.At.UTC().Format("15:04:05"), p.Job, line)
	}
}

func metricText(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
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

func printJobReport(f *factory, rep *job.Report) {
	w := f.io.Out
	fmt.Fprintf(w, "cost report for job %s\n", rep.Job)
	const perNode = 12
	if len(rep.Nodes) <= perNode {
		items := rep.ItemsDone+rep.ItemsLeft > 0
		cols := []string{"INSTANCE", "RAN", "STATE", "RUNNING", "COMPUTE", "STORAGE", "BANDWIDTH", "TOTAL"}
		if items {
			cols = append(cols, "ITEMS", "ITEMS/$")
		}
		t := newTable(w, cols...)
		for _, n := range rep.Nodes {
			row := []string{strconv.FormatInt(n.ID, 10), map[bool]string{true: "yes", false: "no"}[n.Ran], n.State,
				(time.Duration(n.Running) * time.Second).String(), money(n.Compute), money(n.Storage), money(n.Bandwidth), money(n.Total)}
			if items {
				row = append(row, strconv.Itoa(n.ItemsDone), fmt.Sprintf("%.1f", n.ItemsPerDollar))
			}
			t.row(row...)
		}
		t.flush()
	} else {
		fmt.Fprintf(w, "  %d instances (per instance: `vastfleet cost --fleet %s`, or --json)\n", len(rep.Nodes), rep.Job)
	}
	fmt.Fprintf(w, "  compute    %s\n  storage    %s\n  bandwidth  %s\n", money(rep.Compute), money(rep.Storage), money(rep.Bandwidth))
	fmt.Fprintf(w, "  failed-launch waste %s (instances that never ran the job: %d of %d)\n", money(rep.Waste), len(rep.Nodes)-rep.Ran, len(rep.Nodes))
	fmt.Fprintf(w, "  total      %s", money(rep.Total))
	if rep.Estimate > 0 {
		fmt.Fprintf(w, " against an estimate of %s (%s)", money(rep.Estimate), rep.EstimateOf)
	}
	fmt.Fprintln(w)
	if r := rep.Reconcile; r != nil {
		fmt.Fprintf(w, "  charged    %s by the marketplace (difference %s; %d of %d instances differ by a cent or more; per line: `vastfleet cost --reconcile --job %s`)\n",
			money4(r.Total.Charged), signed4(r.Total.Difference), r.Disagree, len(r.Instances), rep.Job)
	} else if rep.ReconcileError != "" {
		fmt.Fprintf(w, "  charged    unknown: %s\n", termSafe(rep.ReconcileError))
	}
	fmt.Fprintf(w, "  findings   %d\n", rep.Findings)
	if rep.ItemsDone+rep.ItemsLeft > 0 {
		fmt.Fprintf(w, "  items      %d done (%d failed), %d left\n", rep.ItemsDone, rep.ItemsFailed, rep.ItemsLeft)
		writeDelivery(w, rep.Delivery)
	}
	if len(rep.Hosts) > 0 {
		t := newTable(w, "HOST", "VALIDATED", "REJECTED", "UNCHECKED", "BAD HOST")
		for _, h := range rep.Hosts {
			t.row(h.Host, strconv.Itoa(h.Validated), strconv.Itoa(h.Rejected), strconv.Itoa(h.Unchecked), h.Caught)
		}
		t.flush()
	}
	fmt.Fprintf(w, "  instances still live %d\n", rep.Live)
}

// writeDelivery says how many items a dollar bought on the instances
// that delivered any: the median, the best and the worst instance, and
// each hardware model's median when there are several.
func writeDelivery(w io.Writer, d *job.Delivery) {
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
			fmt.Fprintf(w, "    %s: %.1f items per dollar (1 instance)\n", termSafe(m.Model), m.MedianItemsPerDollar)
			continue
		}
		fmt.Fprintf(w, "    %s: %.1f items per dollar (median of %d instances)\n", termSafe(m.Model), m.MedianItemsPerDollar, m.Instances)
	}
}
