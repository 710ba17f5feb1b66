package nodes

import (
	"errors"
	"testing"

	"github.com/vastfleet/vastfleet/internal/usage"
)

func TestOutcomeIsPartialWhenSomeNodesFailed(t *testing.T) {
	ok, bad := ExecRow{Node: "node-0"}, ExecRow{Node: "node-1", ExitCode: 1}
	if err := Outcome("the command", []ExecRow{ok, ok}); err != nil {
		t.Errorf("all passed: %v", err)
	}
	err := Outcome("the command", []ExecRow{ok, bad})
	if !errors.As(err, new(usage.Partial)) || err.Error() != "the command failed on 1 of 2 nodes" {
		t.Errorf("one of two failed: %v, want partial", err)
	}
	err = Outcome("sync", []SyncRow{{Error: "x"}})
	if err == nil || errors.As(err, new(usage.Partial)) || err.Error() != "sync failed on all 1 nodes" {
		t.Errorf("all failed: %v, want a plain error", err)
	}
}

func TestRowCellsFollowTheirHeaders(t *testing.T) {
	exit := 0
	for _, c := range []struct {
		header, cells []string
	}{
		{ExecHeader, ExecRow{Node: "n", ID: 1, DurationS: 1.5}.Cells()},
		{SetupHeader, SetupRow{Node: "n", ID: 1, Status: "installed", VerifyExit: &exit}.Cells()},
		{SyncHeader, SyncRow{Node: "n", ID: 1}.Cells()},
		{CollectHeader, CollectRow{Node: "n", ID: 1, Skipped: []string{"a", "b"}}.Cells()},
	} {
		if len(c.cells) != len(c.header) {
			t.Errorf("%q under %q", c.cells, c.header)
		}
	}
	if c := (SetupRow{VerifyExit: &exit}).Cells(); c[4] != "exit 0" || c[5] != "-" {
		t.Errorf("setup cells %q", c)
	}
	if c := (CollectRow{Skipped: []string{"a", "b"}}).Cells(); c[6] != "a; b" {
		t.Errorf("collect cells %q", c)
	}
}
