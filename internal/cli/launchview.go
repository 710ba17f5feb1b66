package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/liveview"
)

// launchView shows a launch: JSON lines, a live view on a terminal (a bar
// of ready instances, the log above it), or log lines.
type launchView struct {
	f       *factory
	json    bool
	enc     *json.Encoder
	tty     bool
	mu      sync.Mutex
	live    *liveview.View // opened at the first event, on a terminal
	lastLog time.Time
}

func newLaunchView(f *factory, js JSONFlags) *launchView {
	v := &launchView{f: f, json: js.JSON, tty: f.io.ErrTTY && !js.JSON}
	if js.JSON {
		v.enc = json.NewEncoder(js.out(f.io.Out))
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
		v.live = liveview.Open(&v.f.io.ErrOut, v.f.io.ErrTTY, "ready")
	}
	w := v.f.io.ErrOut
	if e.Event == launch.EvProgress && e.Progress != nil {
		p := e.Progress
		if v.live != nil {
			v.live.Update(int64(p.Ready), int64(p.Asked), fmt.Sprintf("booting %d%s  parked %d  releasing %d", p.Booting, stagesNote(p.Stages), p.Parked, p.Releasing),
				fmt.Sprintf("failed %d", p.Failed), fmt.Sprintf("$%.2f/hr now  $%.2f spent", p.DPH, p.Spent), fmt.Sprintf("%s left", p.TimeLeft.Round(time.Second)))
			return
		}
		// Off a terminal, one progress line a minute of marketplace time.
		if e.At.Sub(v.lastLog) >= time.Minute {
			v.lastLog = e.At
			fmt.Fprintf(w, "%s progress: ready %d/%d  booting %d%s  parked %d  releasing %d  failed %d  $%.2f/hr now  $%.2f spent  %s left\n",
				e.At.UTC().Format("15:04:05"), p.Ready, p.Asked, p.Booting, stagesNote(p.Stages), p.Parked, p.Releasing, p.Failed, p.DPH, p.Spent, p.TimeLeft.Round(time.Second))
		}
		return
	}
	if e.Event == launch.EvSummary {
		return
	}
	msg := e.Msg
	if e.InstanceID != 0 {
		msg = fmt.Sprintf("instance %d %s", e.InstanceID, msg)
	}
	fmt.Fprintf(w, "%s %-11s %s\n", e.At.UTC().Format("15:04:05"), e.Event, termSafe(strings.TrimSpace(msg)))
}

// stagesNote says where the booting nodes are, in boot order:
// " (pulling 3, ssh 1, probe 2)", or nothing.
func stagesNote(st map[string]int) string {
	var parts []string
	for _, k := range []string{launch.StagePulling, launch.StageExtracting, launch.StageLoading, launch.StageSSH, launch.StageAgent, launch.StageProbe} {
		if st[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, st[k]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
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
func (v *launchView) finish(ctx context.Context, f *factory, m *fleet.Manager, fleetName string, sum launch.Summary, err error, ask bool) error {
	minReady := sum.MinReady
	if minReady <= 0 {
		minReady = sum.Asked
	}
	if err == nil && !sum.Interrupted && sum.Ready < minReady {
		stopped := ""
		if sum.StoppedAtCap != "" {
			stopped = "; stopped at " + sum.StoppedAtCap
		}
		err = partialError{fmt.Errorf("fleet %s: %d ready of %d asked, below the %d required%s (see `vastfleet ls --fleet %s`; `vastfleet cleanup %s` destroys what is not running)",
			fleetName, sum.Ready, sum.Asked, minReady, stopped, fleetName, fleetName)}
	}
	v.stop()
	if err != nil && !sum.Interrupted {
		return err
	}
	if sum.Interrupted && ask {
		cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		ids, derr := launch.AfterInterrupt(cleanupCtx, m, fleetName, askInterrupt(f.io))
		if derr != nil {
			return derr
		}
		if len(ids) > 0 {
			fmt.Fprintf(f.io.ErrOut, "destroyed %d instance(s)\n", len(ids))
		}
	}
	if v.json {
		return err // the launch emitted the summary line itself
	}
	w := f.io.Out
	fmt.Fprintf(w, "fleet %s: %d ready of %d asked (%d rented, %d replaced, %d failed, %d destroyed)\n",
		fleetName, sum.Ready, sum.Asked, sum.Rented, sum.Replaced, sum.Failed, sum.Destroyed)
	fmt.Fprintf(w, "fleet now: %.0f vCPU, %.0f GB RAM, %d GPUs at $%.3f/hr; boot-phase spend $%.2f; took %s\n",
		sum.VCPU, sum.RAMGB, sum.GPUs, sum.DPHTotal, sum.BootSpend, sum.Elapsed.Round(time.Second))
	if sum.StoppedAtCap != "" {
		fmt.Fprintf(w, "stopped at %s\n", sum.StoppedAtCap)
	}
	if sum.Interrupted {
		fmt.Fprintf(w, "interrupted: continue with `vastfleet launch --resume %s`, or `vastfleet cleanup %s`\n", fleetName, fleetName)
	}
	return err
}

func askInterrupt(ios *IOStreams) string {
	fmt.Fprintf(ios.ErrOut, "\nLaunch interrupted. [k]eep instances (resume later), destroy [u]nready, destroy [a]ll? [k/u/a] ")
	var answer string
	fmt.Fscanln(ios.In, &answer)
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "u", "unready":
		return launch.InterruptDestroyUnready
	case "a", "all":
		return launch.InterruptDestroyAll
	}
	return launch.InterruptKeep
}
