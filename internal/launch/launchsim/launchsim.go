// Package launchsim is a launch's test bench: the simulated marketplace on
// a loopback HTTP server, reached by the real vast client, with a real
// SQLite store and a virtual clock that jumps whenever every goroutine of
// the launch sleeps. The launch tests and the strategy benchmark run on it;
// the launch package itself never links the simulator.
package launchsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

// Start is where every simulated launch's clock starts.
var Start = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

const APIKey = "launch-sim-key-0123456789"

// VirtualClock is a manual clock driven by its sleepers, like a
// discrete-event simulation: a sleeper waits until the clock reaches its
// wake-up time, and whenever the program has been quiet for a moment (no
// new sleeper, no clock move) the clock jumps to the earliest wake-up
// time. So a rent stuck in a 30-second back-off does not stall the launch
// loop's ticks, and nothing waits in real time for virtual minutes.
type VirtualClock struct {
	c *sim.ManualClock

	mu      sync.Mutex
	active  int // requests in flight
	actors  int // goroutines of the launch (see Busy)
	waiters []*waiter
	lastAct time.Time // real time of the last sleeper or clock move
	done    chan struct{}
	stopped sync.Once
}

type waiter struct {
	at time.Time
	ch chan struct{}
}

// quiet is how long every goroutine of the launch must have slept, with
// no request in flight, before the clock jumps.
const quiet = 200 * time.Microsecond

// stall is how long the clock waits for busy goroutines before it moves
// anyway: only a safety net against a goroutine it miscounts.
const stall = 10 * time.Second

// NewVirtualClock starts a virtual clock at start.
func NewVirtualClock(start time.Time) *VirtualClock {
	v := &VirtualClock{c: sim.NewManualClock(start), lastAct: time.Now(), done: make(chan struct{})}
	go v.drive()
	return v
}

// Now is the virtual time.
func (v *VirtualClock) Now() time.Time { return v.c.Now() }

// Advance moves the clock forward by d at once (tests).
func (v *VirtualClock) Advance(d time.Duration) { v.c.Advance(d) }

// Busy counts the launch's goroutines: while fewer of them sleep than
// exist, one is working and the clock stands still.
func (v *VirtualClock) Busy(d int) {
	v.mu.Lock()
	v.actors += d
	v.lastAct = time.Now()
	v.mu.Unlock()
}

func (v *VirtualClock) busy(d int) {
	v.mu.Lock()
	v.active += d
	v.lastAct = time.Now()
	v.mu.Unlock()
}

// Close stops the clock's driver.
func (v *VirtualClock) Close() { v.stopped.Do(func() { close(v.done) }) }

// Sleep waits d of virtual time.
func (v *VirtualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	w := &waiter{at: v.c.Now().Add(d), ch: make(chan struct{})}
	v.mu.Lock()
	v.waiters = append(v.waiters, w)
	v.lastAct = time.Now()
	v.mu.Unlock()
	select {
	case <-w.ch:
		return ctx.Err()
	case <-ctx.Done():
		v.mu.Lock()
		for i, x := range v.waiters {
			if x == w {
				v.waiters = append(v.waiters[:i], v.waiters[i+1:]...)
				break
			}
		}
		v.mu.Unlock()
		return ctx.Err()
	case <-v.done:
		return errors.New("virtual clock closed")
	}
}

func (v *VirtualClock) drive() {
	t := time.NewTicker(100 * time.Microsecond)
	defer t.Stop()
	for {
		select {
		case <-v.done:
			return
		case <-t.C:
		}
		v.mu.Lock()
		idle := time.Since(v.lastAct)
		settled := v.active == 0 && idle >= quiet && len(v.waiters) >= v.actors
		if len(v.waiters) > 0 && (settled || idle >= stall) {
			next := v.waiters[0].at
			for _, w := range v.waiters[1:] {
				if w.at.Before(next) {
					next = w.at
				}
			}
			if v.c.Now().Before(next) {
				v.c.Set(next)
			}
			now := v.c.Now()
			kept := v.waiters[:0]
			for _, w := range v.waiters {
				if w.at.After(now) {
					kept = append(kept, w)
				} else {
					close(w.ch)
				}
			}
			v.waiters = kept
			v.lastAct = time.Now()
		}
		v.mu.Unlock()
	}
}

// counter counts HTTP requests on their way to the marketplace.
// While a request is in flight the virtual clock stands still: the
// request takes no marketplace time.
type counter struct {
	next  http.RoundTripper
	n     atomic.Int64
	clock *VirtualClock
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	c.clock.busy(1)
	defer c.clock.busy(-1)
	resp, err := c.next.RoundTrip(r)
	if err == nil {
		// The body is read after RoundTrip returns; read it here so the
		// whole exchange counts as busy.
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		if rerr != nil {
			return nil, rerr
		}
	}
	return resp, err
}

// Env is a simulated marketplace on a loopback HTTP server, reached by the
// real vast client, with a real SQLite store: what the benchmark and the
// tests launch into.
type Env struct {
	Clock *VirtualClock
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
	e := &Env{Clock: NewVirtualClock(Start)}
	mkt, err := sim.New(sim.Config{Seed: seed, Offers: offers, Clock: e.Clock, APIKey: APIKey, Faults: faults, Balance: 1e6})
	if err != nil {
		return nil, err
	}
	e.Mkt = mkt
	e.srv = httptest.NewServer(mkt.Handler())
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
func Attach(ctx context.Context, url string, clk *VirtualClock, dbPath string) (*Env, error) {
	e := &Env{Clock: clk}
	if err := e.connect(ctx, url, dbPath); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Env) connect(ctx context.Context, url, dbPath string) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	e.calls = &counter{next: tr, clock: e.Clock}
	client, err := vast.New(vast.Options{BaseURL: url, APIKey: APIKey, Timeout: 30 * time.Second,
		HTTPClient: &http.Client{Transport: e.calls}, Sleep: e.Clock.Sleep, Now: e.Clock.Now,
		Rand: func() float64 { return 0.5 }})
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, dbPath)
	if err != nil {
		return err
	}
	e.St = st
	e.M = &fleet.Manager{P: client, S: st, Clock: e.Clock, Sleep: e.Clock.Sleep, PollEvery: 15 * time.Second}
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
