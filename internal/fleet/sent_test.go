package fleet

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider/vast"
)

// The marketplace takes a stop or a destroy as the request arrives, and
// its answer can come much later (it commits first; a slow link; the
// simulator at 60x saving its state, which made each destroy's answer
// 0.5 s of market time late on average, up to 30 s). Cost ends compute
// where the request went out, as the marketplace's ledger does, not where
// the answer came: here every answer comes 30 s after the marketplace
// acted.
func TestSlowAnswersDateStopAndDestroyAtTheRequest(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	a := e.rentRunning(e.rentReq(0))
	b := e.rentRunning(e.rentReq(1))
	e.clock.Advance(10 * time.Minute)
	slow := func(*http.Request) { e.clock.Advance(30 * time.Second) }
	e.gate.set(func(g *gate) { g.afterDelete, g.afterPut = slow, slow })
	if err := e.m.Stop(ctx, []int64{a.ID}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Minute)
	if err := e.m.Destroy(ctx, []int64{a.ID, b.ID}); err != nil {
		t.Fatal(err)
	}
	e.gate.set(func(g *gate) { g.reset() })
	// Where each kind's billing ended on the marketplace's ledger.
	ended := map[int64]map[string]time.Time{}
	for _, le := range e.mkt.Ledger() {
		if ended[le.InstanceID] == nil {
			ended[le.InstanceID] = map[string]time.Time{}
		}
		if le.To.After(ended[le.InstanceID][le.Kind]) {
			ended[le.InstanceID][le.Kind] = le.To
		}
	}
	for _, id := range []int64{a.ID, b.ID} {
		c, err := e.m.InstanceCost(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Live {
			t.Fatalf("instance %d still live after its destroy", id)
		}
		for _, k := range []struct {
			kind string
			end  time.Time
		}{{"compute", c.ComputeSpan.To}, {"storage", c.StorageSpan.To}} {
			if want := ended[id][k.kind]; !k.end.Equal(want) {
				t.Errorf("instance %d: cost ends %s at %s, the marketplace's ledger at %s (%s later)",
					id, k.kind, k.end.Sub(simStart), want.Sub(simStart), k.end.Sub(want))
			}
		}
	}
}

// failSlowDestroy fails the first destroy after it took a while (a 500
// from a marketplace having a bad minute), then destroys as asked.
type failSlowDestroy struct {
	*vast.Client
	e *env
	n int
}

func (f *failSlowDestroy) DestroyInstanceSent(ctx context.Context, id int64) (time.Time, error) {
	if f.n++; f.n == 1 {
		f.e.clock.Advance(DestroyTimeout + time.Minute)
		return time.Time{}, errors.New("HTTP 500 server_error")
	}
	return f.Client.DestroyInstanceSent(ctx, id)
}

// A destroy that took only after the first one failed, past Destroy's
// deadline, is still confirmed by one more listing and dated where it
// took: left to a later reconcile, it was dated at the first (failed)
// request, and cost left out what the instance billed until the one that
// took (seen: 7 minutes of compute, $0.069, on a 300-node launch).
func TestDestroyThatTookPastTheDeadlineIsDatedWhereItTook(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	a := e.rentRunning(e.rentReq(0))
	e.clock.Advance(10 * time.Minute)
	m := e.manager(&failSlowDestroy{Client: e.client, e: e})
	if err := m.Destroy(ctx, []int64{a.ID}); err != nil {
		t.Errorf("destroy: %v", err)
	}
	if _, err := e.m.Reconcile(ctx, ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	e.checkEnds("destroyed on the second try", a.ID)
}
