package demo

import (
	"bytes"
	"fmt"
	"testing"
)

// A demo without --keep removes its data dir at the end: what it prints
// names no path in it and no command that would read it.
func TestDemoScratchPrintsOnlyWhatStays(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	w := &scratchFilter{w: &out, dir: "/tmp/vastfleet-demo-123"}
	fmt.Fprint(w, "job demo: collected 50 file(s) from 50 node(s) into /tmp/vastfleet-demo-123/results/demo\n")
	fmt.Fprint(w, "cost report for job demo\n  50 instances (per instance: `vastfleet cost --fleet demo`, or --json)\n  total ")
	fmt.Fprint(w, "     $0.41\n  charged    $0.4100 by the marketplace (difference -0.0000; 0 of 50 instances differ by a cent or more; per line: `vastfleet cost --reconcile --job demo`)\n")
	fmt.Fprint(w, "  findings   12\n")
	want := "cost report for job demo\n  total      $0.41\n" +
		"  charged    $0.4100 by the marketplace (difference -0.0000; 0 of 50 instances differ by a cent or more)\n  findings   12\n"
	if out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}
}
