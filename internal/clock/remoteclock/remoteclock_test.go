package remoteclock

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The remote simulator's clock is read from many goroutines at once (run
// with -race), never goes backwards, and does not cost a request a call.
func TestConcurrentReadsNeverGoBack(t *testing.T) {
	var hits atomic.Int64
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		json.NewEncoder(w).Encode(Reply{Now: start.Add(time.Duration(hits.Load()) * time.Minute), Scale: 60})
	}))
	defer srv.Close()
	c, err := New(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			prev := time.Time{}
			for range 2000 {
				now := c.Now()
				if now.Before(prev) {
					t.Errorf("clock went backwards: %v after %v", now, prev)
					return
				}
				prev = now
			}
		})
	}
	wg.Wait()
	if n := hits.Load(); n > 200 {
		t.Errorf("16000 readings cost %d requests", n)
	}
}

// A wait of d in the market's time takes d/scale of wall time on a scaled
// simulator and d on a manual one, and ends with its context; a server
// that is not a simulator is refused at once.
func TestSleepTakesTheSimulatorsScale(t *testing.T) {
	var manual atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/sim/clock" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(Reply{Now: time.Now(), Scale: 3600, Manual: manual.Load()})
	}))
	defer srv.Close()
	c, err := New(context.Background(), srv.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	if c.Scale() != 3600 {
		t.Fatalf("scale %v", c.Scale())
	}
	began := time.Now()
	if err := c.Sleep(context.Background(), 100*time.Second); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(began); el < 25*time.Millisecond || el > 5*time.Second {
		t.Errorf("100 s at 3600x took %v of wall time, want about 28ms", el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context = %v", err)
	}

	manual.Store(true)
	m, err := New(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if m.Scale() != 0 {
		t.Fatalf("a manual simulator's scale is %v, want 0", m.Scale())
	}
	began = time.Now()
	if err := m.Sleep(context.Background(), 30*time.Millisecond); err != nil || time.Since(began) < 25*time.Millisecond {
		t.Errorf("30ms on a manual simulator: %v after %v", err, time.Since(began))
	}

	if _, err := New(context.Background(), srv.URL+"/nothing"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("New on a server without /sim/clock: %v", err)
	}
}
