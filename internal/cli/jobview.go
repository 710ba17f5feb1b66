package cli

import (
	"fmt"
	"strconv"
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
	if line := job.EventLine(e); line != "" {
		fmt.Fprintf(v.f.io.ErrOut, "job %s: %s\n", e.JobID(), line)
	}
}

// progress shows the run: on the live view, or a line every 5 s.
func (v *jobView) progress(p job.Progress) {
	if !v.opened && !v.json {
		v.opened = true
		v.live = liveview.Open(&v.f.io.ErrOut, v.f.io.ErrTTY, "job "+p.Job)
	}
	t, line := p.Totals, p.Line()
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
		job.WriteDelivery(w, rep.Delivery)
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
