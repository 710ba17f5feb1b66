package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/liveview"
)

// launchView shows a launch: JSON lines, a live view on a terminal (a bar
// of ready instances, the log above it), or log lines.
type launchView struct {
	f       *factory.Factory
	json    bool
	enc     *json.Encoder
	tty     bool
	mu      sync.Mutex
	live    *liveview.View // opened at the first event, on a terminal
	lastLog time.Time
}

func newLaunchView(f *factory.Factory, js cmdutil.JSONFlags) *launchView {
	v := &launchView{f: f, json: js.JSON, tty: f.IO.ErrTTY && !js.JSON}
	if js.JSON {
		v.enc = json.NewEncoder(js.Out(f.IO.Out))
		v.enc.SetEscapeHTML(false)
	}
	return v
}

func (v *launchView) event(e launch.Event) {
	if v.json {
		v.enc.Encode(e)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tty && v.live == nil {
		v.live = liveview.Open(&v.f.IO.ErrOut, v.f.IO.ErrTTY, "ready")
	}
	if e.Event == launch.EvProgress && e.Progress != nil {
		p := e.Progress
		if v.live != nil {
			v.live.Update(int64(p.Ready), int64(p.Asked), p.Parts()...)
			return
		}
		// Off a terminal, one progress line a minute of marketplace time.
		if e.At.Sub(v.lastLog) >= time.Minute {
			v.lastLog = e.At
			fmt.Fprintln(v.f.IO.ErrOut, p.Line(e.At))
		}
		return
	}
	if e.Event != launch.EvSummary {
		fmt.Fprintln(v.f.IO.ErrOut, e.Line())
	}
}

// stop closes the live view, if one is open; the summary and questions
// come after it.
func (v *launchView) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.live.Close()
	v.live = nil
}

// finish prints the summary, and after an interrupt asks what to do with the
// instances (on a terminal, when --on-interrupt was not given).
// A launch that ends with fewer ready than --min-ready (default: every
// instance asked; on --resume, the stored launch's) exits 3, "partial",
// whatever the rest of the summary.
func (v *launchView) finish(ctx context.Context, f *factory.Factory, m *fleet.Manager, fleetName string, sum launch.Summary, err error, ask bool) error {
	if err == nil {
		if short := sum.Shortfall(fleetName); short != nil {
			err = partialError{short}
		}
	}
	v.stop()
	if err != nil && !sum.Interrupted {
		return err
	}
	if sum.Interrupted && ask {
		cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		ids, derr := launch.AfterInterrupt(cleanupCtx, m, fleetName, askInterrupt(f.IO))
		if derr != nil {
			return derr
		}
		if len(ids) > 0 {
			fmt.Fprintf(f.IO.ErrOut, "destroyed %d instance(s)\n", len(ids))
		}
	}
	if v.json {
		return err // the launch emitted the summary line itself
	}
	fmt.Fprint(f.IO.Out, sum.Report(fleetName))
	return err
}

func askInterrupt(ios *iostreams.IOStreams) string {
	fmt.Fprintf(ios.ErrOut, "\nLaunch interrupted. [k]eep instances (resume later), destroy [u]nready, destroy [a]ll? [k/u/a] ")
	var answer string
	fmt.Fscanln(ios.In, &answer)
	return launch.InterruptAnswer(answer)
}
