package launch

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/store"
)

// UsefulScorer reads the bad-host list of a real store: a ban in force
// makes the machine useless, an expired one is a failure on its record.
func TestUsefulScorerReadsTheBadHostList(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, h := range []store.BadHost{
		{MachineID: 1, Reason: "boot timeout", FailedAt: now.Add(-time.Hour), Until: now.Add(time.Hour)},
		{MachineID: 2, Reason: "exited", FailedAt: now.Add(-48 * time.Hour), Until: now.Add(-24 * time.Hour)},
	} {
		if err := st.MarkBadHost(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	spec := DefaultSpec("f", 10, 10*time.Minute, true)
	spec.ImageGB = 3
	spec.BootTimeout = 5 * time.Minute
	u, err := UsefulScorer(ctx, st, spec, now)
	if err != nil {
		t.Fatal(err)
	}
	if u.ImageGB != 3 || u.Deadline != 5*time.Minute || u.Load == nil {
		t.Fatalf("scorer %+v: want the spec's image and the sooner of deadline and boot timeout", u)
	}
	if r := u.Record(1); !r.Bad || r.Failures != 1 {
		t.Errorf("machine 1 (banned): %+v", r)
	}
	if r := u.Record(2); r.Bad || r.Failures != 1 {
		t.Errorf("machine 2 (ban expired): %+v", r)
	}
	if r := u.Record(3); r != (market.HostRecord{}) {
		t.Errorf("machine 3 (no record): %+v", r)
	}
	o := market.Offer{ID: 9, MachineID: 2, CPUCoresEffective: 16, DPHTotal: 0.2, Reliability: 0.99, Verification: "verified", InetDown: 1000, DiskBW: 1000}
	clean := o
	clean.MachineID = 3
	if u.Score(&o) >= u.Score(&clean) {
		t.Errorf("a machine with a failure on record scores %v, not below a clean one's %v", u.Score(&o), u.Score(&clean))
	}
	none, err := UsefulScorer(ctx, nil, spec, now)
	if err != nil || none.Record != nil {
		t.Fatalf("without a store: %+v, %v", none, err)
	}
}
