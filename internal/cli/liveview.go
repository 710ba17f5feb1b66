package cli

import (
	"bytes"
	"io"
	"strings"
	"sync"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// liveView is the one live display of a long operation on a terminal: a
// progress bar with the status beside it, and log lines printed above it,
// never into it. While it is open the command's stderr goes through it, so
// a warning from any layer lands above the bar too. Off a terminal there is
// none: callers print log lines.
type liveView struct {
	io     *IOStreams
	prev   io.Writer
	p      *mpb.Progress
	bar    *mpb.Bar
	mu     sync.Mutex
	status string
	buf    bytes.Buffer // a log line not yet ended
}

// openLiveView starts the view on io's stderr, named label, if stderr is
// a terminal; else it returns nil, which every method accepts.
func openLiveView(ios *IOStreams, label string) *liveView {
	if !ios.ErrTTY {
		return nil
	}
	v := &liveView{io: ios, prev: ios.ErrOut}
	v.p = mpb.New(mpb.WithOutput(v.prev), mpb.WithWidth(32), mpb.WithAutoRefresh())
	v.bar = v.p.AddBar(0,
		mpb.PrependDecorators(decor.Name(label, decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d", decor.WCSyncSpace)),
		mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
			v.mu.Lock()
			defer v.mu.Unlock()
			return v.status
		})),
	)
	ios.ErrOut = v
	return v
}

// update sets the bar to done of total and the status beside it.
func (v *liveView) update(done, total int64, status string) {
	if v == nil {
		return
	}
	v.mu.Lock()
	v.status = termSafe(status)
	v.mu.Unlock()
	v.bar.SetTotal(max(total, 1), false)
	v.bar.SetCurrent(done)
}

// Write prints whole lines above the bar; a partial line waits for its end.
func (v *liveView) Write(b []byte) (int, error) {
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

// close removes the bar, prints what is left of a log line, and gives
// stderr back. Safe to call twice and on nil.
func (v *liveView) close() {
	if v == nil || v.p == nil {
		return
	}
	v.bar.Abort(true)
	v.p.Wait()
	v.p = nil
	v.io.ErrOut = v.prev
	v.mu.Lock()
	rest := strings.TrimRight(v.buf.String(), "\n")
	v.buf.Reset()
	v.mu.Unlock()
	if rest != "" {
		io.WriteString(v.prev, rest+"\n")
	}
}
