// Package launchsim is a launch's test bench: the simulated marketplace on
// a loopback HTTP server, reached by the real vast client, with a real
// SQLite store and a virtual clock that jumps whenever every goroutine of
// the launch sleeps. The launch tests and the strategy benchmark run on it;
// the launch package itself never links the simulator.
package launchsim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

// Start is where every simulated launch's clock starts.
var Start = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

const APIKey = "launch-sim-key-0123456789"

// counter counts HTTP requests on their way to the marketplace.
type counter struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// Env is a simulated marketplace on a loopback HTTP server, reached by the
// real vast client, with a real SQLite store: what the benchmark and the
// tests launch into.
type Env struct {
	Clock *clock.Virtual
	Mkt   *sim.Market
	St    *store.Store
	M     *fleet.Manager
	srv   *httptest.Server
	calls *counter
}

// Calls is how many HTTP requests reached the marketplace.
func (e *Env) Calls() int64 { return e.calls.n.Load() }

// New builds an Env with its store in dir.
func New(ctx context.Context, seed int64, offers int, faults sim.Faults, dir string) (*Env, error) {
	return NewWrapped(ctx, seed, offers, faults, dir, nil)
}

// NewWrapped is New with wrap in front of the marketplace's handler, for
// failures the simulator does not draw itself; nil wraps nothing.
func NewWrapped(ctx context.Context, seed int64, offers int, faults sim.Faults, dir string, wrap func(http.Handler) http.Handler) (*Env, error) {
	return NewConfig(ctx, sim.Config{Seed: seed, Offers: offers, Faults: faults}, dir, wrap)
}

// NewHosts is New with a machine behind every instance (sim.Config's
// HostDir, under dir): onstart, SSH, the machines' true capacity.
func NewHosts(ctx context.Context, seed int64, offers int, faults sim.Faults, dir string) (*Env, error) {
	return NewConfig(ctx, sim.Config{Seed: seed, Offers: offers, Faults: faults, HostDir: filepath.Join(dir, "hosts")}, dir, nil)
}

// NewConfig builds an Env on a market of cfg; its clock, key and balance
// are the Env's.
func NewConfig(ctx context.Context, cfg sim.Config, dir string, wrap func(http.Handler) http.Handler) (*Env, error) {
	e := &Env{Clock: clock.NewVirtual(Start)}
	cfg.Clock, cfg.APIKey, cfg.Balance = e.Clock, APIKey, 1e6
	mkt, err := sim.New(cfg)
	if err != nil {
		return nil, err
	}
	e.Mkt = mkt
	h := mkt.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	e.srv = httptest.NewServer(h)
	if err := e.connect(ctx, e.srv.URL, filepath.Join(dir, store.FileName)); err != nil {
		e.srv.Close()
		return nil, err
	}
	return e, nil
}

// Attach builds an Env on a marketplace served elsewhere at url, whose
// clock is (or from now on reads) clk: the real client, a store at dbPath
// and a manager, all waiting in clk's virtual time. Close leaves the
// server alone.
func Attach(ctx context.Context, url string, clk *clock.Virtual, dbPath string) (*Env, error) {
	e := &Env{Clock: clk}
	if err := e.connect(ctx, url, dbPath); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Env) connect(ctx context.Context, url, dbPath string) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	e.calls = &counter{next: tr}
	client, err := vast.New(vast.Options{BaseURL: url, APIKey: APIKey, Timeout: 30 * time.Second,
		HTTPClient: &http.Client{Transport: e.calls}, Clock: e.Clock,
		Rand: func() float64 { return 0.5 }})
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, dbPath)
	if err != nil {
		return err
	}
	e.St = st
	e.M = &fleet.Manager{P: client, S: st, Clock: e.Clock, PollEvery: 15 * time.Second}
	return nil
}

// Close stops the clock and the server and closes the store.
func (e *Env) Close() {
	e.Clock.Close()
	if e.srv != nil {
		e.srv.Close()
	}
	e.St.Close()
}

// Candidates ranks the simulated market by vCPUs per $/hr with the
// market-facts filter (rentable, inet both ways ≥ 200 Mb/s, more than 16
// effective cores, not CN or HK, dph_total ≤ 5, disk for the image).
func Candidates(mkt *sim.Market, disk float64) []market.Ranked {
	var keep []sim.Offer
	for _, o := range mkt.Offers() {
		if sim.DepthFilter(&o) && o.DiskSpace >= disk {
			keep = append(keep, o)
		}
	}
	return rankByVCPU(ClientOffers(keep))
}

// ClientOffers reads the simulator's offers as the client does, through
// their JSON: the two sides share no offer type.
func ClientOffers(offers []sim.Offer) []market.Offer {
	b, err := json.Marshal(offers)
	if err != nil {
		panic(fmt.Sprintf("launchsim: %v", err))
	}
	var out []market.Offer
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("launchsim: the simulator's offers do not decode: %v", err))
	}
	return out
}

// rankByVCPU ranks offers by vCPUs per $/hr.
func rankByVCPU(keep []market.Offer) []market.Ranked {
	s, err := market.ScoreBy("vcpu")
	if err != nil {
		panic(fmt.Sprintf("launchsim: %v", err))
	}
	return market.Rank(keep, s)
}

// Faults is the failure profile on top of the realistic one:
// 30% of hosts boot slower than 10 minutes, 10% never boot (half stuck
// loading, half exiting), and offers are taken by others mid-launch.
func Faults() sim.Faults {
	f, _ := sim.Profile("realistic")
	f.SlowBoot = 0.30
	f.StuckLoading = 0.05
	f.BootFail = 0.05
	f.CreateRace = 0.05
	f.OfferChurnPerHour = 0.05
	return f
}
