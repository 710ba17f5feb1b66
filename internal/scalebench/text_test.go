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

// Each side's CPU is its client's and the simulator's with its machines',
// where the sessions' shells run; a process whose CPU is not known adds
// nothing.
func TestExecAndSSHCPU(t *testing.T) {
	t.Parallel()
	f := func(v float64) *float64 { return &v }
	ssh := Phase{Phase: "ssh", Usage: []Usage{{Process: ProcSSH, CPUS: f(3.5)}, {Process: ProcCoord, CPUS: f(9)},
		{Process: ProcSim, CPUS: f(1.25)}, {Process: ProcHosts}}}
	if got := ssh.cpu(ProcSSH, ProcSim, ProcHosts); got != 4.75 {
		t.Errorf("ssh side: %v CPU s, want 4.75 (the coordinator's left out, the hosts' unknown)", got)
	}
	s := Summary{ExecSpeedup: 4.2, SSHOK: 3, ExecCPUS: 1.5, SSHCPUS: 4.75}
	want := "  CPU, client and simulated hosts: exec 1.5s, ssh 4.8s (3.2x), both on this computer's cores"
	if got := s.Lines(); len(got) != 3 || got[2] != want {
		t.Errorf("summary lines %q, want the CPU line %q", got, want)
	}
}
