package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
)

func TestWaitRunningSlowLoading(t *testing.T) {
	e := newEnv(t, envOpts{faults: sim.Faults{SlowBoot: 1}})
	ctx := context.Background()
	req := e.rentReq(0)
	req.Create.Image = "pytorch/pytorch:latest" // slow hosts are slow with a big image
	rec, err := e.m.Rent(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var calls []time.Duration
	rec, err = e.m.WaitRunning(ctx, rec.ID, WaitOptions{Timeout: 2 * time.Hour, OnSlow: func(el time.Duration) { calls = append(calls, el) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0] <= SlowLoading || rec.State != provider.StateRunning {
		t.Fatalf("OnSlow calls %v, state %s", calls, rec.State)
	}
}

func TestWaitRunningBootFailAndStuck(t *testing.T) {
	e := newEnv(t, envOpts{faults: sim.Faults{BootFail: 1}})
	ctx := context.Background()
	rec, err := e.m.Rent(ctx, e.rentReq(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.WaitRunning(ctx, rec.ID, WaitOptions{}); !errors.Is(err, ErrWillNotRun) {
		t.Fatalf("boot fail: err = %v", err)
	}

	e = newEnv(t, envOpts{faults: sim.Faults{StuckLoading: 1}})
	rec, err = e.m.Rent(ctx, e.rentReq(0))
	if err != nil {
		t.Fatal(err)
	}
	start := e.clock.Now()
	_, err = e.m.WaitRunning(ctx, rec.ID, WaitOptions{Timeout: 15 * time.Minute})
	if err == nil || e.clock.Now().Sub(start) < 15*time.Minute {
		t.Fatalf("stuck: err = %v after %s", err, e.clock.Now().Sub(start))
	}
	got, _ := e.st.Instance(ctx, rec.ID)
	if got.State != provider.StateLoading || !got.GoneAt.IsZero() {
		t.Fatalf("stuck instance recorded as %+v", got)
	}
}
