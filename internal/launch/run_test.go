package launch

import (
	"context"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
)

func TestParkAndRelease(t *testing.T) {
	e := newTestEnv(t, 1, sim.Faults{})
	rec := &recorder{}
	spec := baseSpec("park", 20)
	spec.Park = true
	spec.Deadline = 20 * time.Minute
	cands := simCandidates(e.mkt, 10)
	sum, err := Run(context.Background(), e.m, spec, cands, rec.add)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary %+v calls=%d", sum, e.calls.n.Load())
	if sum.Ready != 20 {
		t.Errorf("ready = %d, want 20", sum.Ready)
	}
	if rec.count(EvParked) != 20 || rec.count(EvRelease) != 1 || rec.count(EvRunning) != 20 {
		t.Errorf("parked %d, release waves %d, running again %d", rec.count(EvParked), rec.count(EvRelease), rec.count(EvRunning))
	}
	for _, in := range e.mkt.Instances() {
		if in.Status() != provider.StateRunning {
			t.Errorf("instance %d is %s", in.ID, in.Status())
		}
	}
	checkNoLeaks(t, e.mkt, e.st)
}
