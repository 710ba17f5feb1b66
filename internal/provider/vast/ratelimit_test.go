package vast

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/time/rate"
)

// A 429 slows every later call of the client, not only the retried one,
// and answered calls win the configured rate back.
func TestRateLimitSlowsDownOn429AndRecovers(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 3 {
			http.Error(w, "API requests too frequent endpoint threshold=1.0", http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id": 1, "balance": 5}`))
	}))
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL, APIKey: testKey, RateLimit: 100, Burst: 100,
		Clock: &waits{}, Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Rate(); got != 100 {
		t.Fatalf("configured rate = %v", got)
	}
	if _, err := c.CurrentUser(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Three 429s halve 100 three times; the answer that got through wins 5%.
	if got, want := c.Rate(), rate.Limit(12.5*1.05); got != want {
		t.Fatalf("after three 429s and one answer the rate is %v, want %v", got, want)
	}
	for range 100 {
		if _, err := c.CurrentUser(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Rate(); got != 100 {
		t.Fatalf("after 100 answers the rate is %v, want the configured 100 again", got)
	}
}

// No answer at all says where the fix is.
func TestUnreachableSaysSo(t *testing.T) {
	c, err := New(Options{BaseURL: "http://127.0.0.1:1", APIKey: testKey, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CurrentUser(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot reach 127.0.0.1:1 (check the network or --api-url)") {
		t.Fatalf("err = %v", err)
	}
}
