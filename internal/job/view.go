package job

import (
	"fmt"
	"io"
	"time"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/liveview"
)

// View renders a job's events on the error stream: the live view on a
// terminal, else log lines (the run's progress every five seconds of wall
// time, stamped in the market's). With JSON no live view opens: stdout is
// the report's.
type View struct {
	ios      *iostreams.IOStreams
	json     bool
	opened   bool
	live     *liveview.View
	lastLine time.Time
}

// NewView is the view of a job on ios's error stream.
func NewView(ios *iostreams.IOStreams, asJSON bool) *View {
	return &View{ios: ios, json: asJSON}
}

// Close closes the live view, if one is open.
func (v *View) Close() {
	v.live.Close()
	v.live = nil
}

// Event shows e (Deps.Events).
func (v *View) Event(e Event) {
	if p, ok := e.(Progress); ok {
		v.progress(p)
		return
	}
	if _, ok := e.(Ended); ok {
		v.Close() // what follows may ask a question
	}
	if line := EventLine(e); line != "" {
		fmt.Fprintf(v.ios.ErrOut, "job %s: %s\n", e.JobID(), line)
	}
}

// progress shows the run: on the live view, or a line every 5 s.
func (v *View) progress(p Progress) {
	if !v.opened && !v.json {
		v.opened = true
		v.live = liveview.Open(&v.ios.ErrOut, v.ios.ErrTTY, "job "+p.Job)
	}
	t, line := p.Totals, p.Line()
	switch {
	case v.live != nil && t.ItemsDone+t.ItemsLeft > 0:
		v.live.Update(t.ItemsDone, t.ItemsDone+t.ItemsLeft, "items  "+line)
	case v.live != nil:
		v.live.Update(int64(p.Ended), int64(p.Nodes), "run exited  "+line)
	case time.Since(v.lastLine) >= 5*time.Second:
		v.lastLine = time.Now()
		fmt.Fprintf(v.ios.ErrOut, "%s job %s: %s\n", p.At.UTC().Format("15:04:05"), p.Job, line)
	}
}

// WriteText writes the cost report as up and down print it.
func (rep *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "cost report for job %s\n", rep.Job)
	if cols, rows := rep.NodeTable(); cols != nil {
		cmdutil.WriteTable(w, cols, rows)
	} else {
		fmt.Fprintf(w, "  %d instances (per instance: `vastfleet cost --fleet %s`, or --json)\n", len(rep.Nodes), rep.Job)
	}
	rep.WriteTotals(w)
	if cols, rows := rep.HostTable(); len(rows) > 0 {
		cmdutil.WriteTable(w, cols, rows)
	}
	fmt.Fprintf(w, "  instances still live %d\n", rep.Live)
}
