// Package liveview is the one live display of a long operation on a
// terminal: a progress bar with a status beside it, and log lines printed
// above it, never into it.
package liveview

import (
	"bytes"
	"io"
	"strings"
	"sync"

	"github.com/mattn/go-runewidth"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// View is the live display. While it is open the command's stderr goes
// through it, so a warning from any layer lands above the bar too. Off a
// terminal there is none: callers print log lines.
type View struct {
	errOut *io.Writer
	prev   io.Writer
	p      *mpb.Progress
	bar    *mpb.Bar
	mu     sync.Mutex
	status []string     // the status's parts, least important first
	buf    bytes.Buffer // a log line not yet ended
}

// Open starts the view on *errOut, named label, if it is a terminal
// (errTTY), and points *errOut at the view until Close; else it returns
// nil, which every method accepts.
func Open(errOut *io.Writer, errTTY bool, label string) *View {
	if !errTTY {
		return nil
	}
	v := &View{errOut: errOut, prev: *errOut}
	// The line is as wide as the terminal (mpb asks it at each redraw);
	// the bar takes up to 32 columns of what the status leaves.
	v.p = mpb.New(mpb.WithOutput(v.prev), mpb.WithAutoRefresh())
	v.bar = v.p.AddBar(0, mpb.BarWidth(32),
		mpb.PrependDecorators(decor.Name(label, decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d", decor.WCSyncSpace)),
		mpb.AppendDecorators(decor.Any(func(st decor.Statistics) string {
			v.mu.Lock()
			defer v.mu.Unlock()
			return fitStatus(v.status, st.AvailableWidth-minBar-2)
		})),
	)
	*errOut = v
	return v
}

// minBar is the narrowest bar the status leaves room for.
const minBar = 10

// Update sets the bar to done of total and the status beside it. The
// status is parts, least important first: where the terminal is too
// narrow for all of them, the first ones give way, so that the last
// (findings, rate, spend, time) stay in sight.
func (v *View) Update(done, total int64, parts ...string) {
	if v == nil {
		return
	}
	safe := make([]string, 0, len(parts))
	for _, p := range parts {
		if p != "" {
			safe = append(safe, termsafe.Line(p))
		}
	}
	v.mu.Lock()
	v.status = safe
	v.mu.Unlock()
	v.bar.SetTotal(max(total, 1), false)
	v.bar.SetCurrent(done)
}

// Write prints whole lines above the bar; a partial line waits for its end.
func (v *View) Write(b []byte) (int, error) {
	v.mu.Lock()
	v.buf.Write(b)
	var lines []byte
	if i := bytes.LastIndexByte(v.buf.Bytes(), '\n'); i >= 0 {
		lines = append(lines, v.buf.Next(i+1)...)
	}
	v.mu.Unlock()
	if len(lines) > 0 {
		if _, err := v.p.Write(lines); err != nil {
			// The view is closing: the line still reaches the terminal.
			v.prev.Write(lines)
		}
	}
	return len(b), nil
}

// Close removes the bar, prints what is left of a log line, and gives
// stderr back. Safe to call twice and on nil.
func (v *View) Close() {
	if v == nil || v.p == nil {
		return
	}
	v.bar.Abort(true)
	v.p.Wait()
	v.p = nil
	*v.errOut = v.prev
	v.mu.Lock()
	rest := strings.TrimRight(v.buf.String(), "\n")
	v.buf.Reset()
	v.mu.Unlock()
	if rest != "" {
		io.WriteString(v.prev, rest+"\n")
	}
}

// fitStatus joins parts with two spaces, leaving out the first ones until
// the line fits width columns; a last part too wide alone is cut with "…".
func fitStatus(parts []string, width int) string {
	for i := range parts {
		line := strings.Join(parts[i:], "  ")
		if n := runewidth.StringWidth(line); n <= width {
			return line
		}
	}
	if len(parts) == 0 || width <= 0 {
		return ""
	}
	return runewidth.Truncate(parts[len(parts)-1], width, "…")
}
