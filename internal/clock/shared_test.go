package clock

import (
	"context"
	"testing"
	"time"
)

// Between sessions the local market runs at its pace over wall time.
func TestSharedRunsAtItsPaceBetweenSessions(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewShared(start, 3600)
	defer s.Close()
	time.Sleep(20 * time.Millisecond)
	if got := s.Now().Sub(start); got < 72*time.Second {
		t.Fatalf("after 20 ms of wall time at 3600x the clock moved %s, want at least 72s", got)
	}
}

// While a session works, the market stands still however long that
// takes; when it waits, the market moves to its wake-up at once.
func TestSharedMovesOnlyWhenItsSessionWaits(t *testing.T) {
	t.Parallel()
	s := NewShared(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 3600)
	defer s.Close()
	end := s.Open()
	t0 := s.Now()
	time.Sleep(50 * time.Millisecond) // the session's own slow work
	if got := s.Now(); !got.Equal(t0) {
		t.Fatalf("the clock moved %s while the session worked", got.Sub(t0))
	}
	began := time.Now()
	if err := s.Sleep(context.Background(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := s.Now().Sub(t0); got != time.Hour {
		t.Fatalf("after a session's 1h wait the clock moved %s", got)
	}
	if wall := time.Since(began); wall > 5*time.Second {
		t.Fatalf("a session's 1h wait took %s of wall time", wall)
	}
	end()
	time.Sleep(20 * time.Millisecond)
	if got := s.Now().Sub(t0); got <= time.Hour {
		t.Fatalf("after the session ended the clock did not run on at its pace (%s)", got)
	}
}

// With two sessions, one's wait is held while the other works, and goes
// on when the other ends.
func TestSharedWaitsForEverySession(t *testing.T) {
	t.Parallel()
	s := NewShared(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 1)
	defer s.Close()
	endA := s.Open()
	defer endA()
	endB := s.Open()
	woke := make(chan error, 1)
	go func() { woke <- s.Sleep(context.Background(), time.Minute) }()
	select {
	case err := <-woke:
		t.Fatalf("a session's wait ended (%v) while another session worked", err)
	case <-time.After(200 * time.Millisecond):
	}
	endB()
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not end once the other session ended")
	}
}

// A virtual clock with a jump moves only as far as the jump reached.
func TestVirtualJumpMovesWithTheMarket(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v := NewVirtual(start)
	defer v.Close()
	var asked []time.Time
	v.SetJump(func(_ context.Context, to time.Time) (time.Time, error) {
		asked = append(asked, to)
		return to.Add(5 * time.Second), nil // the market was already a little further on
	})
	if err := v.Sleep(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || !asked[0].Equal(start.Add(time.Minute)) {
		t.Fatalf("jumps asked %v, want one to %s", asked, start.Add(time.Minute))
	}
	if got := v.Now().Sub(start); got != time.Minute+5*time.Second {
		t.Fatalf("clock at +%s, want where the market was (+1m5s)", got)
	}
}
