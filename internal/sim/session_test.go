package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
)

// A command's session holds the local market's clock: its sleep moves
// the market at once to the time asked, /sim/clock says the market stands
// still while the session is open and runs at its pace once it ends, and
// a sleep on a session that is not open is refused.
func TestSessionsHoldTheSharedClock(t *testing.T) {
	t.Parallel()
	sc := clock.NewShared(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), 1)
	defer sc.Close()
	m, err := New(Config{Seed: 1, Offers: 200, APIKey: "k", Clock: sc})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	clockScale := func() (float64, int) {
		resp, err := http.Get(srv.URL + "/sim/clock")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Scale    float64 `json:"scale"`
			Sessions int     `json:"sessions"`
		}
		json.NewDecoder(resp.Body).Decode(&r)
		return r.Scale, r.Sessions
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/sim/session", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var open SessionReply
	if err := json.Unmarshal(line, &open); err != nil || open.ID == "" {
		t.Fatalf("session answer %q: %v", line, err)
	}
	if scale, n := clockScale(); scale != 0 || n != 1 {
		t.Fatalf("with a session open /sim/clock says scale %g, %d sessions; want 0 and 1", scale, n)
	}
	sleep := func(id string, until time.Time) (int, SessionReply) {
		b, _ := until.MarshalText()
		resp, err := http.Post(srv.URL+"/sim/session/"+id+"/sleep?until="+url.QueryEscape(string(b)), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r SessionReply
		json.NewDecoder(resp.Body).Decode(&r)
		return resp.StatusCode, r
	}
	want := open.Now.Add(3 * time.Hour)
	began := time.Now()
	code, r := sleep(open.ID, want)
	if code != 200 || !r.Now.Equal(want) {
		t.Fatalf("sleep for 3h: HTTP %d, market at %s, want %s", code, r.Now, want)
	}
	if wall := time.Since(began); wall > 5*time.Second {
		t.Fatalf("a 3h sleep took %s of wall time", wall)
	}
	if code, _ := sleep("nosuchsession", want.Add(time.Hour)); code != http.StatusNotFound {
		t.Fatalf("a sleep on no session: HTTP %d, want 404", code)
	}
	if got := sc.Now(); !got.Equal(want) {
		t.Fatalf("a stranger's sleep moved the market to %s", got)
	}
	cancel() // the command ends (or is killed: its connection closes)
	deadline := time.Now().Add(5 * time.Second)
	for {
		scale, n := clockScale()
		if scale == 1 && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the session ended /sim/clock says scale %g, %d sessions", scale, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
