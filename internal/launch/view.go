package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/liveview"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// View shows a launch: JSON lines, a live view on a terminal (a bar of
// ready instances, the log above it), or log lines.
type View struct {
	ios     *iostreams.IOStreams
	enc     *json.Encoder // with --json
	tty     bool
	mu      sync.Mutex
	live    *liveview.View // opened at the first event, on a terminal
	lastLog time.Time
}

// NewView shows a launch on ios; its events as JSON lines on jsonOut
// when that is not nil.
func NewView(ios *iostreams.IOStreams, jsonOut io.Writer) *View {
	v := &View{ios: ios, tty: ios.ErrTTY && jsonOut == nil}
	if jsonOut != nil {
		v.enc = json.NewEncoder(jsonOut)
		v.enc.SetEscapeHTML(false)
	}
	return v
}

// Event shows e (the events Run and Resume send).
func (v *View) Event(e Event) {
	if v.enc != nil {
		v.enc.Encode(e)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tty && v.live == nil {
		v.live = liveview.Open(&v.ios.ErrOut, v.ios.ErrTTY, "ready")
	}
	if e.Event == EvProgress && e.Progress != nil {
		p := e.Progress
		if v.live != nil {
			v.live.Update(int64(p.Ready), int64(p.Asked), p.Parts()...)
			return
		}
		// Off a terminal, one progress line a minute of marketplace time.
		if e.At.Sub(v.lastLog) >= time.Minute {
			v.lastLog = e.At
			fmt.Fprintln(v.ios.ErrOut, p.Line(e.At))
		}
		return
	}
	if e.Event != EvSummary {
		fmt.Fprintln(v.ios.ErrOut, e.Line())
	}
}

// Stop closes the live view, if one is open; the summary and questions
// come after it.
func (v *View) Stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.live.Close()
	v.live = nil
}

// Finish prints the summary, and after an interrupt asks what to do with
// the instances (ask: on a terminal, when --on-interrupt was not given).
// A launch that ends with fewer ready than --min-ready (default: every
// instance asked; on --resume, the stored launch's) is partial (exit 3),
// whatever the rest of the summary.
func (v *View) Finish(ctx context.Context, m *fleet.Manager, fleetName string, sum Summary, err error, ask bool) error {
	if err == nil {
		if short := sum.Shortfall(fleetName); short != nil {
			err = usage.Partial{Err: short}
		}
	}
	v.Stop()
	if err != nil && !sum.Interrupted {
		return err
	}
	if sum.Interrupted && ask {
		cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		ids, derr := AfterInterrupt(cleanupCtx, m, fleetName, v.askInterrupt())
		if derr != nil {
			return derr
		}
		if len(ids) > 0 {
			fmt.Fprintf(v.ios.ErrOut, "destroyed %d instance(s)\n", len(ids))
		}
	}
	if v.enc != nil {
		return err // the launch emitted the summary line itself
	}
	fmt.Fprint(v.ios.Out, sum.Report(fleetName))
	return err
}

func (v *View) askInterrupt() string {
	fmt.Fprintf(v.ios.ErrOut, "\nLaunch interrupted. [k]eep instances (resume later), destroy [u]nready, destroy [a]ll? [k/u/a] ")
	var answer string
	fmt.Fscanln(v.ios.In, &answer)
	return InterruptAnswer(answer)
}
