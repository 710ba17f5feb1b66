package factory

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/launch"
)

// TestJobLaunchViewLeavesTheInterruptToTheJob: inside up, the launch's
// own interrupt line ("interrupted (keep) ... `launch --resume`") is not
// shown, since the job applies --on-interrupt and names `up --resume`;
// the launch's other events are shown as launch shows them.
func TestJobLaunchViewLeavesTheInterruptToTheJob(t *testing.T) {
	t.Parallel()
	var errOut bytes.Buffer
	event, stop := jobLaunchView(&iostreams.IOStreams{ErrOut: &errOut})
	at := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	event(launch.Event{Event: launch.EvReady, At: at, Msg: "instance 7 booted in 30s"})
	event(launch.Event{Event: launch.EvInterrupted, At: at, Msg: "interrupted (keep): 0 instances to destroy; `launch --resume f` continues"})
	stop()
	got := errOut.String()
	if !strings.Contains(got, "instance 7 booted") {
		t.Errorf("the ready event is not shown: %q", got)
	}
	if strings.Contains(got, "launch --resume") || strings.Contains(got, "interrupted") {
		t.Errorf("the launch's interrupt line is shown inside the job: %q", got)
	}
}
