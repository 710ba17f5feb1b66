package launch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/launch/launchsim"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

func newTestEnv(t *testing.T, seed int64, faults sim.Faults) *launchsim.Env {
	t.Helper()
	e, err := launchsim.New(context.Background(), seed, 3000, faults, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// recorder keeps every event.
type recorder struct {
	mu  sync.Mutex
	evs []Event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

func (r *recorder) count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.evs {
		if e.Event == kind {
			n++
		}
	}
	return n
}

func (r *recorder) find(kind, substr string) *Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.evs {
		if r.evs[i].Event == kind && strings.Contains(r.evs[i].Msg, substr) {
			return &r.evs[i]
		}
	}
	return nil
}

func baseSpec(name string, count int) Spec {
	return Spec{Fleet: name, Count: count, Backfill: true,
		Create: provider.CreateRequest{Image: "vastai/base:cuda-12", Disk: 10, Runtype: "ssh"}}
}

// checkNoLeaks asserts that every simulated instance carrying one of our
// labels is known to the store, that no offer was rented twice, and that
// every instance still alive in the simulator is live in the store and
// not meant to be destroyed (zero orphans, zero double rents).
func checkNoLeaks(t *testing.T, mkt *sim.Market, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	for off, n := range mkt.CreatesPerOffer() {
		if n > 1 {
			t.Errorf("offer %d rented %d times", off, n)
		}
	}
	alive := map[int64]bool{}
	for _, in := range mkt.State() {
		if _, ok := fleet.ParseLabel(in.Label); !ok {
			continue
		}
		row, err := st.Instance(ctx, in.ID)
		if err != nil {
			it, ierr := st.IntentByLabel(ctx, in.Label)
			t.Errorf("sim instance %d (%s, created %s, destroyed %v) unknown to the store: %v; its intent: %+v %v",
				in.ID, in.Label, in.CreatedAt.Format(time.TimeOnly), in.Destroyed, err, it, ierr)
			continue
		}
		if in.Destroyed {
			continue
		}
		alive[in.ID] = true
		if !row.Live() || row.Wanted == store.WantDestroy {
			t.Errorf("sim instance %d is alive but the store has it gone=%v wanted=%s", in.ID, !row.Live(), row.Wanted)
		}
	}
	live, err := st.LiveInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range live {
		if !alive[in.ID] {
			t.Errorf("store has instance %d live, the simulator does not", in.ID)
		}
	}
}

// interruptAfter runs spec and cancels it at the n-th event of kind, as a
// Ctrl+C would; the launch must end interrupted.
func interruptAfter(t *testing.T, e *launchsim.Env, spec Spec, kind string, n int32) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen atomic.Int32
	_, err := Run(ctx, e.M, spec, launchsim.Candidates(e.Mkt, 10), func(ev Event) {
		if ev.Event == kind && seen.Add(1) == n {
			cancel()
		}
	})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
}
