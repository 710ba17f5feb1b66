package cli

import (
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/nodes"
)

func TestSetupPhasesInOrderOncePerSpec(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.launchFleet("u", 3)
	phase1 := "echo one >> phases.log"
	phase2 := `echo two >> phases.log; [ "$VASTFLEET_NODE_RANK" != 1 ] || [ -e fixed ] || exit 4`
	verify := "echo verified; tr '\\n' , < phases.log; echo"
	setup := func(wantCode int, args ...string) []nodes.SetupRow {
		t.Helper()
		r := e.run(append([]string{"setup", "--fleet", "u", "--json", "--phase", phase1, "--phase", phase2, "--verify", verify}, args...)...)
		if r.code != wantCode {
			t.Fatalf("setup: exit %d, want %d\n%s\n%s", r.code, wantCode, r.out, r.err)
		}
		return decode[[]nodes.SetupRow](t, r.out)
	}
	// Node 1 fails phase 2: the table says so, exit 3, the others pass.
	rows := setup(3)
	for i, r := range rows {
		switch i {
		case 1:
			if r.Status != "failed" || r.Error != "phase 2: exit 4" || r.PhasesRun != 2 || r.VerifyExit != nil {
				t.Errorf("node 1: %+v, want failed in phase 2 and not verified", r)
			}
		default:
			if r.Status != "installed" || r.PhasesRun != 2 || r.VerifyExit == nil || *r.VerifyExit != 0 || r.VerifyOutput != "verified\none,two," {
				t.Errorf("node %d: %+v, want installed, phases in order, verified", i, r)
			}
		}
	}
	// Unchanged spec: the installed nodes are skipped (verified again),
	// the failed one installs again.
	e.ok("exec", "--fleet", "u", "--", `[ "$VASTFLEET_NODE_RANK" != 1 ] || touch fixed`)
	rows = setup(0)
	for i, r := range rows {
		want, runs, out := "unchanged", 0, "verified\none,two,"
		if i == 1 {
			want, runs, out = "installed", 2, "verified\none,two,one,two,"
		}
		if r.Status != want || r.PhasesRun != runs || r.VerifyOutput != out {
			t.Errorf("node %d re-run: %+v, want %s after %d phases, output %q", i, r, want, runs, out)
		}
	}
	// A changed spec installs everywhere.
	r := e.ok("setup", "--fleet", "u", "--phase", "echo three >> phases.log", "--verify", "tail -1 phases.log")
	if strings.Count(r.out, "installed") != 3 || !strings.Contains(r.out, "[u-node-2] three\n") {
		t.Errorf("changed spec:\n%s", r.out)
	}
	if r := e.run("setup", "--fleet", "u"); r.code != 2 {
		t.Errorf("setup without --phase: exit %d, want 2 (usage)", r.code)
	}
}
