package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWallSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (Wall{}).Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if err := (Wall{}).Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep(1ms) = %v", err)
	}
	if err := (Wall{}).Sleep(context.Background(), -time.Second); err != nil {
		t.Fatalf("Sleep of a negative duration = %v", err)
	}
}

// sleepAsync starts c.Sleep(ctx, d) and returns where its result arrives.
func sleepAsync(ctx context.Context, c Clock, d time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.Sleep(ctx, d) }()
	return done
}

// waitSleepers waits until n sleepers wait on m.
func waitSleepers(t *testing.T, m *Manual, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		m.mu.Lock()
		got := len(m.waiters)
		m.mu.Unlock()
		if got == n {
			return
		}
	}
	t.Fatalf("never %d sleepers on the manual clock", n)
}

func asleep(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s: Sleep returned (%v) before the clock reached its deadline", what, err)
	case <-time.After(20 * time.Millisecond):
	}
}

func woke(t *testing.T, done <-chan error, want error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, want) {
			t.Fatalf("%s: Sleep = %v, want %v", what, err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: Sleep still waiting", what)
	}
}

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestManualSleepReturnsWhenAdvancedPastItsDeadline(t *testing.T) {
	m := NewManual(start)
	done := sleepAsync(context.Background(), m, time.Hour)
	waitSleepers(t, m, 1)
	m.Advance(59 * time.Minute)
	asleep(t, done, "59 of 60 minutes")
	m.Advance(-time.Hour) // ignored
	if got := m.Now(); !got.Equal(start.Add(59 * time.Minute)) {
		t.Fatalf("Now = %v after a negative Advance", got)
	}
	m.Advance(time.Minute)
	woke(t, done, nil, "60 of 60 minutes")
	waitSleepers(t, m, 0)

	// Set past the deadline wakes it too; a sleeper with a later deadline
	// sleeps on.
	early := sleepAsync(context.Background(), m, time.Minute)
	late := sleepAsync(context.Background(), m, time.Hour)
	waitSleepers(t, m, 2)
	m.Set(m.Now().Add(2 * time.Minute))
	woke(t, early, nil, "Set past the deadline")
	asleep(t, late, "Set short of the deadline")
	m.Advance(time.Hour)
	woke(t, late, nil, "Advance past the deadline")

	if err := m.Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) = %v", err)
	}
}

func TestManualSleepEndsWithItsContext(t *testing.T) {
	m := NewManual(start)
	ctx, cancel := context.WithCancel(context.Background())
	done := sleepAsync(ctx, m, time.Hour)
	waitSleepers(t, m, 1)
	cancel()
	woke(t, done, context.Canceled, "cancelled")
	waitSleepers(t, m, 0) // it left no waiter behind
	if err := m.Sleep(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v", err)
	}
	if got := m.Now(); !got.Equal(start) {
		t.Fatalf("the clock moved to %v by itself", got)
	}
}

func TestSteppedSleepMovesItsClock(t *testing.T) {
	m := NewManual(start)
	s := Stepped{M: m}
	if err := s.Sleep(context.Background(), 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := s.Now(); !got.Equal(start.Add(10*time.Minute)) || !m.Now().Equal(got) {
		t.Fatalf("after Sleep(10m): %v", got)
	}
}

func TestScaledNowAndRebase(t *testing.T) {
	wall := NewManual(start)
	c := NewScaled(start, start, 60, wall)
	wall.Advance(time.Second)
	if got := c.Now(); !got.Equal(start.Add(time.Minute)) {
		t.Errorf("one wall second at 60x: %v", got)
	}
	w, s := c.Wall()
	if !w.Equal(wall.Now()) || !s.Equal(start.Add(time.Minute)) {
		t.Errorf("Wall() = %v, %v", w, s)
	}
	c.Rebase(start, wall.Now().Add(time.Hour)) // reads start an hour of wall time from now
	if got := c.Now(); !got.Equal(start) {
		t.Errorf("before its wall start the clock reads %v, want its start", got)
	}
	c.RebaseNow(start.Add(24 * time.Hour))
	wall.Advance(2 * time.Second)
	if got := c.Now(); !got.Equal(start.Add(24*time.Hour + 2*time.Minute)) {
		t.Errorf("after RebaseNow: %v", got)
	}
	if c.Scale() != 60 || NewScaled(start, start, 0, nil).Scale() != 1 {
		t.Errorf("scales %v, %v", c.Scale(), NewScaled(start, start, 0, nil).Scale())
	}
}

func TestScaledSleepWaitsDividedByItsScale(t *testing.T) {
	wall := NewManual(start)
	c := NewScaled(start, start, 60, wall)
	done := sleepAsync(context.Background(), c, time.Hour) // one minute of wall time
	waitSleepers(t, wall, 1)
	wall.Advance(59 * time.Second)
	asleep(t, done, "59 wall seconds")
	wall.Advance(time.Second)
	woke(t, done, nil, "60 wall seconds")

	ctx, cancel := context.WithCancel(context.Background())
	done = sleepAsync(ctx, c, time.Hour)
	waitSleepers(t, wall, 1)
	cancel()
	woke(t, done, context.Canceled, "cancelled")

	// On the wall clock: an hour at 36000x is 100 ms.
	fast := NewScaled(start, time.Now(), 36000, nil)
	began := time.Now()
	if err := fast.Sleep(context.Background(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(began); el < 90*time.Millisecond || el > 5*time.Second {
		t.Errorf("an hour at 36000x took %v of wall time, want 100ms", el)
	}
}

func TestFixedStandsStillAndSleepsWallTime(t *testing.T) {
	c := Fixed{At: start}
	if err := c.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Fixed moved to %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v", err)
	}
}
