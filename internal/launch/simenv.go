package launch

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

// simStart is where every simulated launch's clock starts.
var simStart = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

const simKey = "launch-sim-key-0123456789"

// virtualClock is a manual clock whose sleeps advance it: a sleeper moves
// the clock to its own wake-up time (never backwards), so concurrent
// sleepers overlap as they would in real time instead of adding up.
type virtualClock struct {
	mu sync.Mutex
	c  *sim.ManualClock
}

func (v *virtualClock) Now() time.Time { return v.c.Now() }

func (v *virtualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	target := v.c.Now().Add(d)
	v.mu.Lock()
	if v.c.Now().Before(target) {
		v.c.Set(target)
	}
	v.mu.Unlock()
	return ctx.Err()
}

// counter counts HTTP requests on their way to the marketplace.
type counter struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// simEnv is a simulated marketplace on a loopback HTTP server, reached by
// the real vast client, with a real SQLite store: what the benchmark and
// the tests launch into.
type simEnv struct {
	clock *virtualClock
	mkt   *sim.Market
	srv   *httptest.Server
	calls *counter
	st    *store.Store
	m     *fleet.Manager
}

func newSimEnv(ctx context.Context, seed int64, offers int, faults sim.Faults, dir string) (*simEnv, error) {
	e := &simEnv{clock: &virtualClock{c: sim.NewManualClock(simStart)}}
	mkt, err := sim.New(sim.Config{Seed: seed, Offers: offers, Clock: e.clock, APIKey: simKey, Faults: faults, Balance: 1e6})
	if err != nil {
		return nil, err
	}
	e.mkt = mkt
	e.srv = httptest.NewServer(mkt.Handler())
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	e.calls = &counter{next: tr}
	client, err := vast.New(vast.Options{BaseURL: e.srv.URL, APIKey: simKey, Timeout: 30 * time.Second,
		HTTPClient: &http.Client{Transport: e.calls}, Sleep: e.clock.Sleep, Now: e.clock.Now,
		Rand: func() float64 { return 0.5 }})
	if err != nil {
		e.srv.Close()
		return nil, err
	}
	st, err := store.Open(ctx, filepath.Join(dir, store.FileName))
	if err != nil {
		e.srv.Close()
		return nil, err
	}
	e.st = st
	e.m = &fleet.Manager{P: client, S: st, Clock: e.clock, Sleep: e.clock.Sleep, PollEvery: 15 * time.Second}
	return e, nil
}

func (e *simEnv) Close() {
	e.srv.Close()
	e.st.Close()
}

// spend is the ledger's total (compute, storage and bandwidth) so far.
func (e *simEnv) spend() float64 {
	t := 0.0
	for _, le := range e.mkt.Ledger() {
		t += le.Amount
	}
	return t
}

// simCandidates ranks the simulated market by vCPUs per $/hr with the
// market-facts filter (rentable, inet both ways ≥ 200 Mb/s, more than 16
// effective cores, not CN or HK, dph_total ≤ 5, disk for the image).
func simCandidates(mkt *sim.Market, disk float64) []market.Ranked {
	var keep []market.Offer
	for _, o := range mkt.Offers() {
		c := strings.ToUpper(o.Country())
		if !o.Rentable || o.InetUp < 200 || o.InetDown < 200 || o.CPUCoresEffective <= 16 ||
			c == "CN" || c == "HK" || o.DPHTotal > 5 || o.DiskSpace < disk {
			continue
		}
		keep = append(keep, o)
	}
	s, err := market.ScoreBy("vcpu")
	if err != nil {
		panic(fmt.Sprintf("launch: %v", err))
	}
	return market.Rank(keep, s)
}
