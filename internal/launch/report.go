package launch

import (
	"fmt"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// Parts are the progress as a live view shows it beside the ready bar:
// booting, failed, money, time left.
func (p Progress) Parts() []string {
	return []string{fmt.Sprintf("booting %d%s  parked %d  releasing %d", p.Booting, stagesNote(p.Stages), p.Parked, p.Releasing),
		fmt.Sprintf("failed %d", p.Failed), fmt.Sprintf("$%.2f/hr now  $%.2f spent", p.DPH, p.Spent), fmt.Sprintf("%s left", p.TimeLeft.Round(time.Second))}
}

// Line is the progress as a log line at at, off a terminal.
func (p Progress) Line(at time.Time) string {
	return fmt.Sprintf("%s progress: ready %d/%d  booting %d%s  parked %d  releasing %d  failed %d  $%.2f/hr now  $%.2f spent  %s left",
		at.UTC().Format("15:04:05"), p.Ready, p.Asked, p.Booting, stagesNote(p.Stages), p.Parked, p.Releasing, p.Failed, p.DPH, p.Spent, p.TimeLeft.Round(time.Second))
}

// stagesNote says where the booting nodes are, in boot order:
// " (pulling 3, ssh 1, probe 2)", or nothing.
func stagesNote(st map[string]int) string {
	var parts []string
	for _, k := range []string{StagePulling, StageExtracting, StageLoading, StageSSH, StageAgent, StageProbe} {
		if st[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, st[k]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// Line is the event as a log line, made safe for a terminal.
func (e Event) Line() string {
	msg := e.Msg
	if e.InstanceID != 0 {
		msg = fmt.Sprintf("instance %d %s", e.InstanceID, msg)
	}
	return fmt.Sprintf("%s %-11s %s", e.At.UTC().Format("15:04:05"), e.Event, termsafe.Line(strings.TrimSpace(msg)))
}

// Shortfall is the error of a launch that ended, uninterrupted, with fewer
// ready than its quorum (default: every instance asked); nil otherwise.
func (s Summary) Shortfall(fleetName string) error {
	minReady := s.MinReady
	if minReady <= 0 {
		minReady = s.Asked
	}
	if s.Interrupted || s.Ready >= minReady {
		return nil
	}
	stopped := ""
	if s.StoppedAtCap != "" {
		stopped = "; stopped at " + s.StoppedAtCap
	}
	return fmt.Errorf("fleet %s: %d ready of %d asked, below the %d required%s (see `vastfleet ls --fleet %s`; `vastfleet cleanup %s` destroys what is not running)",
		fleetName, s.Ready, s.Asked, minReady, stopped, fleetName, fleetName)
}

// Report is the summary as launch prints it.
func (s Summary) Report(fleetName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fleet %s: %d ready of %d asked (%d rented, %d replaced, %d failed, %d destroyed)\n",
		fleetName, s.Ready, s.Asked, s.Rented, s.Replaced, s.Failed, s.Destroyed)
	fmt.Fprintf(&b, "fleet now: %.0f vCPU, %.0f GB RAM, %d GPUs at $%.3f/hr; boot-phase spend $%.2f; took %s\n",
		s.VCPU, s.RAMGB, s.GPUs, s.DPHTotal, s.BootSpend, s.Elapsed.Round(time.Second))
	if s.StoppedAtCap != "" {
		fmt.Fprintf(&b, "stopped at %s\n", s.StoppedAtCap)
	}
	if s.Interrupted {
		fmt.Fprintf(&b, "interrupted: continue with `vastfleet launch --resume %s`, or `vastfleet cleanup %s`\n", fleetName, fleetName)
	}
	return b.String()
}

// InterruptAnswer is what to do after an interrupt, from the user's answer
// to "[k]eep, destroy [u]nready, destroy [a]ll?": keep unless they said
// otherwise.
func InterruptAnswer(answer string) string {
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "u", "unready":
		return InterruptDestroyUnready
	case "a", "all":
		return InterruptDestroyAll
	}
	return InterruptKeep
}
