package job

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/iostreams"
)

func TestViewOffATerminalWritesLines(t *testing.T) {
	var b bytes.Buffer
	v := NewView(&iostreams.IOStreams{ErrOut: &b}, false)
	at := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	v.Event(Progress{About: About{Job: "j"}, At: at, Nodes: 2})
	v.Event(Progress{About: About{Job: "j"}, At: at, Nodes: 2}) // within 5 s: no second line
	v.Event(Ended{About: About{Job: "j"}, Why: "run exited on every node"})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "06:00:00 job j: ") || lines[1] != "job j: run exited on every node" {
		t.Errorf("view wrote:\n%s", b.String())
	}
}

func TestReportWriteTextListsFewNodesAndTheLive(t *testing.T) {
	rep := &Report{Job: "j", Nodes: []ReportNode{{ID: 1, Ran: true, State: "gone", Total: 0.25}}, Ran: 1, Total: 0.25, Live: 0}
	var b bytes.Buffer
	rep.WriteText(&b)
	got := b.String()
	for _, want := range []string{"cost report for job j\n", "INSTANCE\tRAN\tSTATE", "1\tyes\tgone\t0s\t$0.00\t$0.00\t$0.00\t$0.25\n", "  total      $0.25", "  instances still live 0\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	rep.Nodes = make([]ReportNode, nodesListed+1)
	b.Reset()
	rep.WriteText(&b)
	if !strings.Contains(b.String(), "  13 instances (per instance: `vastfleet cost --fleet j`, or --json)\n") {
		t.Errorf("many nodes listed one by one:\n%s", b.String())
	}
}

func TestBackgroundArgsDropDetachAndNameTheJob(t *testing.T) {
	args := []string{"up", "t.yaml", "--detach", "--json", "--detach=true"}
	got := BackgroundArgs(args, "t-1")
	if want := "up t.yaml --json --job-id t-1"; strings.Join(got, " ") != want {
		t.Errorf("args %q, want %q", got, want)
	}
	if args[2] != "--detach" {
		t.Errorf("the caller's args changed: %q", args)
	}
	var b bytes.Buffer
	(&Detached{Job: "t-1", State: "running", PID: 9, Log: "up.log"}).WriteText(&b)
	if !strings.HasPrefix(b.String(), "job t-1 is running in the background (pid 9)\n  dashboard  -\n") {
		t.Errorf("detached text:\n%s", b.String())
	}
}

func TestStatusCellsFollowTheHeader(t *testing.T) {
	c := Status{ID: "j", Live: 2, DPH: 0.5, Spent: 1.234, Estimate: 2}.Cells()
	if len(c) != len(StatusHeader) || c[0] != "j" || c[3] != "2" || c[4] != "0.500" || c[5] != "$1.23" || c[6] != "$2.00" {
		t.Errorf("cells %q under %q", c, StatusHeader)
	}
}

func TestResumingKeepsTheAgentsCoordinator(t *testing.T) {
	rec := &Record{ID: "j", File: "t.yaml", State: "running", CoordAddr: "10.0.0.1:8470"}
	if file, addr, err := Resuming(rec, "127.0.0.1:0", false); err != nil || file != "t.yaml" || addr != "10.0.0.1:8470" {
		t.Errorf("Resuming = %q, %q, %v", file, addr, err)
	}
	if _, addr, _ := Resuming(rec, "0.0.0.0:9000", true); addr != "0.0.0.0:9000" {
		t.Errorf("the address given was not kept: %q", addr)
	}
	rec.State = StateDone
	if _, _, err := Resuming(rec, "", false); err == nil {
		t.Error("a done job resumed")
	}
	if _, err := (&Record{ID: "j"}).ResultsDir(); err == nil || !strings.Contains(err.Error(), "job j has collected no results here yet") {
		t.Errorf("no local results: %v", err)
	}
}
