package cli

import (
	"fmt"
	"time"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/liveview"
)

// jobView renders a job's events: the live view on a terminal, else log
// lines (the run's progress every five seconds of wall time, stamped in
// the market's).
type jobView struct {
	f        *factory.Factory
	json     bool
	opened   bool
	live     *liveview.View
	lastLine time.Time
}

func newJobView(f *factory.Factory, asJSON bool) *jobView { return &jobView{f: f, json: asJSON} }

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
		fmt.Fprintf(v.f.IO.ErrOut, "job %s: %s\n", e.JobID(), line)
	}
}

// progress shows the run: on the live view, or a line every 5 s.
func (v *jobView) progress(p job.Progress) {
	if !v.opened && !v.json {
		v.opened = true
		v.live = liveview.Open(&v.f.IO.ErrOut, v.f.IO.ErrTTY, "job "+p.Job)
	}
	t, line := p.Totals, p.Line()
	switch {
	case v.live != nil && t.ItemsDone+t.ItemsLeft > 0:
		v.live.Update(t.ItemsDone, t.ItemsDone+t.ItemsLeft, "items  "+line)
	case v.live != nil:
		v.live.Update(int64(p.Ended), int64(p.Nodes), "run exited  "+line)
	case time.Since(v.lastLine) >= 5*time.Second:
		v.lastLine = time.Now()
		fmt.Fprintf(v.f.IO.ErrOut, "%s job %s: %s\n", p.At.UTC().Format("15:04:05"), p.Job, line)
	}
}

// printJobReport prints a job's cost report.
func printJobReport(f *factory.Factory, rep *job.Report) {
	w := f.IO.Out
	fmt.Fprintf(w, "cost report for job %s\n", rep.Job)
	if cols, rows := rep.NodeTable(); cols != nil {
		printRows(w, cols, rows)
	} else {
		fmt.Fprintf(w, "  %d instances (per instance: `vastfleet cost --fleet %s`, or --json)\n", len(rep.Nodes), rep.Job)
	}
	rep.WriteTotals(w)
	if cols, rows := rep.HostTable(); len(rows) > 0 {
		printRows(w, cols, rows)
	}
	fmt.Fprintf(w, "  instances still live %d\n", rep.Live)
}
