package factory

import (
	"context"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
)

// Once a job's run starts, a paced market moves steadily at its pace
// under the capacity model, while vastfleet works too: the machines'
// processes take wall time, and a node is billed for the time it works.
// Before the run (the job's sync and setup), and without the model, the
// clock stands while vastfleet works, as during the launch.
func TestRunningMarketMovesSteadilyUnderTheCapacityModel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scale   float64
		running bool
		moves   bool
	}{{6000, true, true}, {6000, false, false}, {0, true, false}} {
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		v := clock.NewVirtual(t0)
		v.SetPace(1000)
		f := &Factory{Opts: Options{SimCapacityScale: tc.scale}, virtual: v}
		v.Busy(2) // keepMarketMoving's sleeper, and a goroutine at work
		f.keepMarketMoving()
		if tc.running {
			f.steadyMarket()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		for ctx.Err() == nil && !v.Now().After(t0.Add(10*time.Second)) {
			time.Sleep(time.Millisecond)
		}
		cancel()
		if moved := v.Now().After(t0.Add(10 * time.Second)); moved != tc.moves {
			t.Errorf("capacity scale %g, run started %v: the market moved to %v while vastfleet worked; want moving %v", tc.scale, tc.running, v.Now().Sub(t0), tc.moves)
		}
		f.Close()
		v.Close()
	}
}
