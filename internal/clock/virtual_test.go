package clock

import (
	"context"
	"testing"
	"time"
)

// A paced virtual clock stands still while the program works; once
// steady it moves at its pace however busy the program is, and never
// ahead of it: a market whose machines run real processes bills the
// time they run.
func TestSteadyClockKeepsItsPaceWhileTheProgramWorks(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v := NewVirtual(t0)
	defer v.Close()
	const pace = 1000
	v.SetPace(pace)
	v.Busy(2) // the sleeper, and a goroutine that works and never sleeps
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	woke := make(chan error, 1)
	go func() { woke <- v.Sleep(ctx, time.Second) }()
	select {
	case err := <-woke:
		t.Fatalf("a paced clock moved while the program worked (err %v, now %v)", err, v.Now())
	case <-time.After(200 * time.Millisecond):
	}

	began := time.Now()
	v.SetSteady(true)
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second): // 1 ms at its pace; a loaded computer is slower
		t.Fatalf("a steady clock did not move: now %v", v.Now())
	}
	// Ninety-nine more market seconds, one sleep at a time.
	for range 99 {
		if err := v.Sleep(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	wall := time.Since(began)
	moved := v.Now().Sub(t0)
	if moved < 100*time.Second {
		t.Errorf("the clock moved %v for 100 sleeps of a second", moved)
	}
	if limit := time.Duration(pace * float64(wall)); moved > limit {
		t.Errorf("the clock moved %v in %v of wall time, ahead of its pace (%v)", moved, wall, limit)
	}
	t.Logf("100 market seconds in %v of wall time at pace %d", wall.Round(time.Millisecond), pace)
}
