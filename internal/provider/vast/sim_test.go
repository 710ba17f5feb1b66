package vast

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/provider/providertest"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// simEnv is a simulator behind a real loopback HTTP server and a client
// for it.
type simEnv struct {
	m     *sim.Market
	clock *clock.Manual
	srv   *httptest.Server
	c     *Client
	waits *waits
	logs  *bytes.Buffer
	hits  atomic.Int64 // requests that reached the server
}

var simStart = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// newSimEnv starts a simulator; wrap, when set, sits in front of it to
// inject failures the simulator does not model.
func newSimEnv(t *testing.T, cfg sim.Config, wrap func(http.Handler) http.Handler) *simEnv {
	t.Helper()
	e := &simEnv{clock: clock.NewManual(simStart), waits: &waits{}, logs: &bytes.Buffer{}}
	cfg.Clock = e.clock
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	if cfg.Offers == 0 {
		cfg.Offers = 500
	}
	m, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	var h http.Handler = m.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	e.c = e.client(t, testKey)
	return e
}

func (e *simEnv) client(t *testing.T, key string) *Client {
	t.Helper()
	c, err := New(Options{
		BaseURL: e.srv.URL, APIKey: key, Clock: e.waits,
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: e.logs}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConformanceAgainstSimulator(t *testing.T) {
	e := newSimEnv(t, sim.Config{Seed: 7, HostDir: t.TempDir()}, nil)
	t.Cleanup(func() { e.m.Close() })
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		return providertest.Harness{Provider: e.c, Keys: e.c, Clock: clock.Stepped{M: e.clock}}
	})
}

func TestSimSearchMatchesServerSemantics(t *testing.T) {
	e := newSimEnv(t, sim.Config{Seed: 3}, nil)
	q, _, err := market.Parse("num_gpus>=2 gpu_ram>=16", market.ParseOptions{Order: "dph_total", Limit: 30})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.c.SearchOffers(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	want, err := market.Select(clientOffers(t, e.m.Offers()), q, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("%d offers, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID {
			t.Fatalf("offer %d is %d, want %d", i, got[i].ID, want[i].ID)
		}
	}
}

func TestSimSweepFindsEveryOffer(t *testing.T) {
	e := newSimEnv(t, sim.Config{Seed: 11, Offers: 800, ResultCap: 25}, nil)
	q, _, err := market.Parse("num_gpus>=1 dph<3", market.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := market.Select(clientOffers(t, e.m.Offers()), q, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 100 {
		t.Fatalf("only %d matching offers; the sweep would not be exercised", len(all))
	}
	before := e.hits.Load()
	got, reqs, err := provider.SweepOffers(context.Background(), e.c, q, 25)
	if err != nil {
		t.Fatal(err)
	}
	if int64(reqs) != e.hits.Load()-before {
		t.Errorf("sweep counted %d requests, server saw %d", reqs, e.hits.Load()-before)
	}
	var gotIDs, wantIDs []int64
	for _, o := range got {
		gotIDs = append(gotIDs, o.ID)
	}
	for _, o := range all {
		wantIDs = append(wantIDs, o.ID)
	}
	slices.Sort(gotIDs)
	slices.Sort(wantIDs)
	if !slices.Equal(gotIDs, wantIDs) {
		t.Fatalf("sweep found %d offers, the market holds %d matching", len(gotIDs), len(wantIDs))
	}
	t.Logf("swept %d offers with cap 25 in %d requests", len(got), reqs)
}

func TestSim429WithRetryAfter(t *testing.T) {
	e := newSimEnv(t, sim.Config{Seed: 1, Faults: sim.Faults{Rate429: 1, RetryAfter: 2 * time.Second}}, nil)
	_, err := e.c.CurrentUser(context.Background())
	if !errors.Is(err, provider.ErrRateLimited) {
		t.Fatalf("err = %v, want ErrRateLimited", err)
	}
	if !strings.Contains(err.Error(), "too frequent") {
		t.Errorf("the plain-text 429 body is lost: %v", err)
	}
	if e.hits.Load() != 8 {
		t.Errorf("%d attempts, want 8 (a refusal is waited out longer than other failures)", e.hits.Load())
	}
	for _, d := range e.waits.all() {
		if d != 2*time.Second {
			t.Fatalf("waits %v, want 2s each (Retry-After)", e.waits.all())
		}
	}
}

func TestSim429WithoutRetryAfterBacksOffWithJitter(t *testing.T) {
	// The real API sends no Retry-After: the client's own jittered,
	// growing, capped backoff applies, and the call succeeds once the
	// server lets it through.
	var n atomic.Int64
	e := newSimEnv(t, sim.Config{Seed: 1}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) <= 3 {
				http.Error(w, "API requests too frequent endpoint threshold=1.0", http.StatusTooManyRequests)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	if _, err := e.c.CurrentUser(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := e.waits.all()
	if len(w) != 3 {
		t.Fatalf("waits %v", w)
	}
	for i, d := range w {
		if ceil := time.Second << i; d < 0 || d > ceil {
			t.Errorf("wait %d = %v, outside [0, %v]", i, d, ceil)
		}
	}
}

func TestSim5xx(t *testing.T) {
	e := newSimEnv(t, sim.Config{Seed: 1, Faults: sim.Faults{Rate5xx: 1}}, nil)
	_, err := e.c.ShowInstance(context.Background(), 1)
	if !errors.Is(err, provider.ErrServer) || errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("err = %v, want ErrServer", err)
	}
	if e.hits.Load() != 5 {
		t.Errorf("GET tried %d times, want 5", e.hits.Load())
	}
}

func TestSimLostCreateIsNotRetried(t *testing.T) {
	e := newSimEnv(t, sim.Config{Seed: 5, Faults: sim.Faults{LostCreate: 1}}, nil)
	ctx := context.Background()
	offers, err := e.c.SearchOffers(ctx, providertest.SearchQuery(10))
	if err != nil || len(offers) == 0 {
		t.Fatalf("search: %v", err)
	}
	_, err = e.c.CreateInstance(ctx, offers[0].ID, provider.CreateRequest{Image: "ubuntu:22.04", Disk: 10, Label: "lost-one"})
	if !errors.Is(err, provider.ErrMaybeCreated) {
		t.Fatalf("err = %v, want ErrMaybeCreated", err)
	}
	if n := e.m.CreatesPerOffer()[offers[0].ID]; n != 1 {
		t.Fatalf("the simulator saw %d creates, want exactly 1", n)
	}
	// The create did happen: the label finds it, as callers must check.
	l, err := e.c.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Instances) != 1 || l.Instances[0].LabelText() != "lost-one" {
		t.Fatalf("listing after a lost create: %+v", l)
	}
}

func TestSimAuthAs404IsAuth(t *testing.T) {
	e := newSimEnv(t, sim.Config{Seed: 1, Faults: sim.Faults{AuthAs404: true}}, nil)
	bad := e.client(t, "wrong-key-"+testKey[:4])
	ctx := context.Background()
	_, err := bad.ShowInstance(ctx, 1)
	checkAuth(t, err)
	checkAuth(t, bad.DestroyInstance(ctx, 1))
	_, err = bad.ListInstances(ctx)
	checkAuth(t, err)

	e2 := newSimEnv(t, sim.Config{Seed: 1}, nil)
	_, err = e2.client(t, "wrong").CurrentUser(ctx)
	checkAuth(t, err)
}

func checkAuth(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, provider.ErrAuth) || errors.Is(err, provider.ErrNotFound) {
		t.Errorf("err = %v, want ErrAuth and not ErrNotFound", err)
	}
}

func TestSimListingPageFailureIsNotAPartialListing(t *testing.T) {
	var failPages atomic.Bool
	e := newSimEnv(t, sim.Config{Seed: 9}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if failPages.Load() && r.URL.Path == "/api/v1/instances/" && r.URL.Query().Get("after_token") != "" {
				http.Error(w, "upstream timeout", http.StatusGatewayTimeout)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	ctx := context.Background()
	q := providertest.SearchQuery(10)
	q.Limit = 60
	offers, err := e.c.SearchOffers(ctx, q)
	if err != nil || len(offers) < 30 {
		t.Fatalf("search: %d offers, %v", len(offers), err)
	}
	for i, rented := 0, 0; rented < 30; i++ {
		if i == len(offers) {
			t.Fatalf("rented %d of %d offers", rented, len(offers))
		}
		_, err := e.c.CreateInstance(ctx, offers[i].ID, provider.CreateRequest{Image: "ubuntu:22.04", Disk: 10, Label: fmt.Sprintf("l%d", i)})
		switch {
		case errors.Is(err, provider.ErrOfferGone):
			// a slice of a machine whose GPUs this test's rents already hold
		case err != nil:
			t.Fatal(err)
		default:
			rented++
		}
	}
	l, err := e.c.ListInstances(ctx)
	if err != nil || len(l.Instances) != 30 || l.Total != 30 {
		t.Fatalf("listing: %d rows, total %d, %v", len(l.Instances), l.Total, err)
	}
	if l.Pages != 2 {
		t.Errorf("30 instances at %d a page came in %d requests, want 2", pageSize, l.Pages)
	}
	failPages.Store(true)
	l, err = e.c.ListInstances(ctx)
	if err == nil || l.Instances != nil {
		t.Fatalf("partial listing: %d rows, err %v", len(l.Instances), err)
	}
}

func TestSimKeyNeverInErrorsOrLogs(t *testing.T) {
	e := newSimEnv(t, sim.Config{Seed: 1, Faults: sim.Faults{Rate5xx: 0.5, Rate429: 0.3}}, nil)
	ctx := context.Background()
	bad := e.client(t, testKey+"-revoked")
	var errs []error
	_, err := e.c.ShowInstance(ctx, 424242)
	errs = append(errs, err, e.c.DestroyInstance(ctx, 424242))
	_, err = bad.CurrentUser(ctx)
	errs = append(errs, err)
	_, err = bad.ListInstances(ctx)
	errs = append(errs, err)
	_, err = bad.CreateInstance(ctx, 1, provider.CreateRequest{Image: "x", Disk: 10})
	errs = append(errs, err)
	for _, err := range errs {
		if err == nil {
			t.Error("expected an error")
			continue
		}
		if strings.Contains(err.Error(), testKey) {
			t.Errorf("error text holds the key: %v", err)
		}
	}
	if e.logs.Len() == 0 || strings.Contains(e.logs.String(), testKey) {
		t.Errorf("log (%d bytes) holds the key or nothing", e.logs.Len())
	}
}

func TestSimInsufficientBalance(t *testing.T) {
	e := newSimEnv(t, sim.Config{Seed: 2, Balance: 0.0001}, nil)
	ctx := context.Background()
	offers, err := e.c.SearchOffers(ctx, providertest.SearchQuery(10))
	if err != nil || len(offers) == 0 {
		t.Fatalf("search: %v", err)
	}
	_, err = e.c.CreateInstance(ctx, offers[0].ID, provider.CreateRequest{Image: "ubuntu:22.04", Disk: 10, Label: "broke"})
	if !errors.Is(err, provider.ErrInsufficientBalance) || errors.Is(err, provider.ErrMaybeCreated) {
		t.Fatalf("err = %v, want ErrInsufficientBalance", err)
	}
	if u, err := e.c.CurrentUser(ctx); err != nil || u.Balance > 0.001 {
		t.Fatalf("user %+v, %v", u, err)
	}
}

func TestRateLimitThrottlesRequests(t *testing.T) {
	e := newSimEnv(t, sim.Config{Seed: 1}, nil)
	c, err := New(Options{BaseURL: e.srv.URL, APIKey: testKey, RateLimit: 200, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < 6; i++ {
		if _, err := c.CurrentUser(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// 6 requests at 200/s with burst 1 need at least 5 × 5 ms.
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("6 requests took %v: not throttled", el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.CurrentUser(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
}

func TestSimOperatorCalls(t *testing.T) {
	e := newSimEnv(t, sim.Config{Seed: 4}, nil)
	ctx := context.Background()
	offers, err := e.c.SearchOffers(ctx, providertest.SearchQuery(10))
	if err != nil || len(offers) == 0 {
		t.Fatalf("search: %v", err)
	}
	cr, err := e.c.CreateInstance(ctx, offers[0].ID, provider.CreateRequest{Image: "ubuntu:22.04", Disk: 10, Label: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	id := cr.NewContract
	for i := 0; i < 120; i++ {
		in, err := e.c.ShowInstance(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if in.Status() == provider.StateRunning {
			if provider.SSHURL(in) == "" {
				t.Errorf("running instance without an ssh route: ports=%v ssh=%s:%d", in.Ports, in.SSHHost, in.SSHPort)
			}
			break
		}
		e.clock.Advance(10 * time.Second)
	}
	if err := e.c.SetLabel(ctx, id, "relabelled"); err != nil {
		t.Fatal(err)
	}
	if in, err := e.c.ShowInstance(ctx, id); err != nil || in.LabelText() != "relabelled" {
		t.Fatalf("label after SetLabel: %q, %v", in.LabelText(), err)
	}
	if err := e.c.RebootInstance(ctx, id); err != nil {
		t.Fatal(err)
	}
	logs, err := e.c.InstanceLogs(ctx, id, 50)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("log: %.200q", logs)
	if err := e.c.RebootInstance(ctx, 424242); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("reboot of a missing instance: %v", err)
	}
}

// The --new search form and the pricing types, against the simulator over
// loopback: the same query gives the same offers in either form, and bid
// pricing lists each offer at its minimum bid.
func TestSearchFormsAndPricingTypes(t *testing.T) {
	ctx := context.Background()
	e := newSimEnv(t, sim.Config{Seed: 4}, nil)
	q, _, err := market.Parse("num_gpus=1 rentable=true", market.ParseOptions{NoDefault: true, Order: "id", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := e.c.SearchOffers(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := e.c.SearchOffersNew(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) == 0 || !slices.EqualFunc(plain, wrapped, func(a, b market.Offer) bool { return a.ID == b.ID && a.DPHTotal == b.DPHTotal }) {
		t.Fatalf("--new gave %d offers, the POST form %d, or different ones", len(wrapped), len(plain))
	}
	q.Type = "bid"
	bids, err := e.c.SearchOffersNew(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]market.Offer{}
	for _, o := range plain {
		byID[o.ID] = o
	}
	cheaper := 0
	for _, o := range bids {
		od, ok := byID[o.ID]
		if !ok {
			continue
		}
		if want := o.MinBid + o.StorageTotalCost; math.Abs(o.DPHTotal-want) > 1e-9 {
			t.Errorf("offer %d at bid pricing: dph_total %v, want min_bid + storage %v", o.ID, o.DPHTotal, want)
		}
		if o.DPHTotal < od.DPHTotal {
			cheaper++
		}
	}
	if cheaper == 0 {
		t.Error("no offer is cheaper at bid pricing than on demand")
	}
}

// change bid: the body the vastai CLI sends reaches the simulator, which
// bills the new bid; an on-demand instance and a missing one are refused.
func TestSimChangeBid(t *testing.T) {
	e := newSimEnv(t, sim.Config{Seed: 4}, nil)
	ctx := context.Background()
	offers, err := e.c.SearchOffers(ctx, providertest.SearchQuery(10))
	if err != nil || len(offers) < 2 {
		t.Fatalf("search: %d offers, %v", len(offers), err)
	}
	bid := 0.05
	cr, err := e.c.CreateInstance(ctx, offers[0].ID, provider.CreateRequest{Image: "ubuntu:22.04", Disk: 10, Label: "bid", Price: &bid})
	if err != nil {
		t.Fatal(err)
	}
	var b provider.Bidder = e.c
	raised := 0.08
	if err := b.ChangeBid(ctx, cr.NewContract, &raised); err != nil {
		t.Fatal(err)
	}
	in, err := e.c.ShowInstance(ctx, cr.NewContract)
	if err != nil {
		t.Fatal(err)
	}
	if !in.IsBid || in.DPHBase != raised {
		t.Errorf("after change bid: is_bid %v, dph_base %v, want true, %v", in.IsBid, in.DPHBase, raised)
	}
	if err := b.ChangeBid(ctx, cr.NewContract, nil); err != nil {
		t.Errorf("change bid to a winning price (null): %v", err)
	}
	od, err := e.c.CreateInstance(ctx, offers[1].ID, provider.CreateRequest{Image: "ubuntu:22.04", Disk: 10, Label: "od"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ChangeBid(ctx, od.NewContract, &raised); err == nil {
		t.Error("change bid of an on-demand instance succeeded")
	}
	if err := b.ChangeBid(ctx, 424242, &raised); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("change bid of a missing instance: %v", err)
	}
}

// clientOffers reads the simulator's offers as the client does, through
// their JSON: the two sides share no offer type.
func clientOffers(t *testing.T, offers []sim.Offer) []market.Offer {
	t.Helper()
	b, err := json.Marshal(offers)
	if err != nil {
		t.Fatal(err)
	}
	var out []market.Offer
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
