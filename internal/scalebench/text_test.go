package scalebench

import (
	"slices"
	"testing"
)

func TestPhaseAndSummaryText(t *testing.T) {
	skipped := Phase{Phase: "sync", Skipped: true, Note: "no nodes", Command: "sync x"}
	if got := skipped.Lines(); !slices.Equal(got, []string{"sync: skipped (no nodes)"}) || skipped.Rows() != nil {
		t.Errorf("skipped phase: %q, rows %v", got, skipped.Rows())
	}
	cpu := 1.234
	p := Phase{Phase: "exec", OK: 3, Nodes: 4, WallS: 2.05, Error: "boom\x1b[2J", Command: "exec -- true", Usage: []Usage{{Process: "vastfleet", CPUS: &cpu}}}
	want := []string{"exec: 3 of 4 nodes, 2.0 s", "  error: boom?[2J", "  exec -- true"}
	if got := p.Lines(); len(got) != 3 || got[0] != want[0] || got[2] != want[2] {
		t.Errorf("phase lines %q, want %q", got, want)
	}
	if got := p.Rows(); len(got) != 1 || !slices.Equal(got[0], []string{"vastfleet", "1.23", "n/a", "n/a", ""}) {
		t.Errorf("phase rows %q", got)
	}
	s := Summary{SimRSSAfterMB: 12.34, HostsLeft: 2, FDLimit: 1024}
	if got, want := s.After(), "after destroy: the simulator holds 12.3 MB, 2 of its machines' processes left; open-file limit 1024"; got != want {
		t.Errorf("after: %q, want %q", got, want)
	}
}
