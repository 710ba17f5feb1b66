package fleet

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

const testKey = "test-key-0123456789"

var simStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// gate sits between the real client and the real simulator handler and
// breaks listings, destroys and user answers on demand.
type gate struct {
	next http.Handler

	mu           sync.Mutex
	failLists    int                        // answer the next N listing requests with 500
	shortLists   int                        // drop a row (total kept) from the next N listing answers
	hide         map[int64]bool             // leave these out of listings, total adjusted (a consistent, lagging listing)
	oddRows      map[int64]bool             // list these rows with a count the client cannot read (num_gpus as a word)
	eatDeletes   int                        // answer the next N destroys with success without destroying
	userID       int64                      // non-zero: answer users/current with this id
	onCreate     func(r *http.Request) bool // called before a create reaches the simulator; false drops it
	afterCreate  func(r *http.Request)      // called after the simulator applied a create, before the answer
	afterDelete  func(r *http.Request)      // likewise for a destroy
	afterPut     func(r *http.Request)      // likewise for one instance's start or stop
	beforeDelete func(r *http.Request) bool // called before a destroy reaches the simulator; false drops it
	lists        int
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	isList := r.Method == http.MethodGet && r.URL.Path == "/api/v1/instances/"
	if isList {
		g.lists++
	}
	if isList && g.failLists > 0 {
		g.failLists--
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(500)
		io.WriteString(w, `{"success":false,"error":"server_error","msg":"boom"}`)
		return
	}
	if r.Method == http.MethodDelete && g.eatDeletes > 0 {
		g.eatDeletes--
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"success":true}`)
		return
	}
	short := isList && g.shortLists > 0
	if short {
		g.shortLists--
	}
	hide := make(map[int64]bool, len(g.hide))
	for k, v := range g.hide {
		hide[k] = v
	}
	odd := make(map[int64]bool, len(g.oddRows))
	for k, v := range g.oddRows {
		odd[k] = v
	}
	userID := g.userID
	onCreate, afterCreate, afterDelete, beforeDelete, afterPut := g.onCreate, g.afterCreate, g.afterDelete, g.beforeDelete, g.afterPut
	g.mu.Unlock()

	isCreate := r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/api/v0/asks/")
	if isCreate && onCreate != nil && !onCreate(r) {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	isDelete := r.Method == http.MethodDelete
	if isDelete && beforeDelete != nil && !beforeDelete(r) {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var after func(*http.Request)
	switch {
	case isCreate:
		after = afterCreate
	case isDelete:
		after = afterDelete
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/api/v0/instances/") && r.PathValue("id") == "" &&
		strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 3:
		after = afterPut
	}
	if after != nil {
		rec := httptest.NewRecorder()
		g.next.ServeHTTP(rec, r)
		after(r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		return
	}
	if !(isList && (short || len(hide) > 0 || len(odd) > 0)) && !(userID != 0 && r.URL.Path == "/api/v0/users/current") {
		g.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	g.next.ServeHTTP(rec, r)
	var body map[string]any
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &body) != nil {
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		return
	}
	if userID != 0 {
		body["id"] = userID
	} else {
		rows, _ := body["instances"].([]any)
		var kept []any
		dropped := 0
		for _, row := range rows {
			id := int64(row.(map[string]any)["id"].(float64))
			if hide[id] {
				dropped++
				continue
			}
			if odd[id] {
				row.(map[string]any)["num_gpus"] = "two"
			}
			kept = append(kept, row)
		}
		body["total_instances"] = body["total_instances"].(float64) - float64(dropped)
		if short && len(kept) > 0 {
			kept = kept[1:]
		}
		if kept == nil {
			kept = []any{}
		}
		body["instances"] = kept
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// reset clears every fault; the caller holds g.mu.
func (g *gate) reset() {
	g.failLists, g.shortLists, g.hide, g.oddRows, g.eatDeletes, g.userID, g.onCreate = 0, 0, nil, nil, 0, 0, nil
	g.afterCreate, g.afterDelete, g.beforeDelete, g.afterPut = nil, nil, nil, nil
}

func (g *gate) listCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lists
}

func (g *gate) set(f func(g *gate)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g)
}

type env struct {
	t      *testing.T
	clock  *clock.Manual
	mkt    *sim.Market
	gate   *gate
	srv    *httptest.Server
	client *vast.Client
	st     *store.Store
	dbPath string
	m      *Manager
	offers []market.Offer
}

type envOpts struct {
	faults  sim.Faults
	seed    int64
	noStore bool
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	if o.seed == 0 {
		o.seed = 7
	}
	e := &env{t: t, clock: clock.NewManual(simStart)}
	// IDBase 1 keeps instance ids under 20000, where the gate's tests hide
	// them (a market otherwise offsets its ids at random).
	mkt, err := sim.New(sim.Config{Seed: o.seed, Offers: 300, Clock: e.clock, APIKey: testKey, Faults: o.faults, IDBase: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.mkt = mkt
	e.gate = &gate{next: mkt.Handler()}
	e.srv = httptest.NewServer(e.gate)
	t.Cleanup(e.srv.Close)
	e.client = e.newClient(testKey)
	// One offer per machine: sibling slices of one machine crowd each
	// other out, and these tests rent their offers independently.
	machines := map[int64]bool{}
	for _, off := range mkt.Offers() {
		if off.DiskSpace >= 20 && off.NumGPUs > 0 && !machines[off.MachineID] {
			machines[off.MachineID] = true
			e.offers = append(e.offers, clientOffer(t, off))
		}
	}
	if !o.noStore {
		e.dbPath = t.TempDir() + "/vastfleet.db"
		st, err := store.Open(context.Background(), e.dbPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		e.st = st
		e.m = e.manager(e.client)
	}
	return e
}

func (e *env) newClient(key string) *vast.Client {
	c, err := vast.New(vast.Options{BaseURL: e.srv.URL, APIKey: key, Timeout: 5 * time.Second,
		Clock: clock.Stepped{M: e.clock}, Rand: func() float64 { return 0.5 }})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) manager(p provider.Provider) *Manager {
	return &Manager{P: p, S: e.st, Clock: envClock{e}, Log: slog.New(slog.DiscardHandler)}
}

// envClock is the managers' clock: the market's manual clock, moved by
// the managers' own waits (see sleep).
type envClock struct{ e *env }

func (c envClock) Now() time.Time { return c.e.clock.Now() }

func (c envClock) Sleep(ctx context.Context, d time.Duration) error { return c.e.sleep(ctx, d) }

// sleep advances the virtual clock by d, stopping early at the next moment
// the simulator changes an instance by itself, so that polls observe every
// transition at the exact time it happens.
func (e *env) sleep(ctx context.Context, d time.Duration) error {
	now := e.clock.Now()
	until := now.Add(d)
	for _, s := range e.mkt.State() {
		if !s.Destroyed && !s.ReadyAt.IsZero() && s.ReadyAt.After(now) && s.ReadyAt.Before(until) {
			until = s.ReadyAt
		}
	}
	e.clock.Set(until)
	return ctx.Err()
}

func (e *env) rentReq(i int) RentRequest {
	return RentRequest{Fleet: "f1", Offer: e.offers[i],
		Create: provider.CreateRequest{Image: "ubuntu:22.04", Disk: 20, Runtype: "ssh"}}
}

// rentRunning rents req and waits until it runs, as the rent command does.
func (e *env) rentRunning(req RentRequest) store.Instance {
	e.t.Helper()
	rec, err := e.m.Rent(context.Background(), req)
	if err != nil {
		e.t.Fatal(err)
	}
	if rec, err = e.m.WaitRunning(context.Background(), rec.ID, WaitOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// labelFor labels rentals of fleet as this env's store does.
func (e *env) labelFor(fleet string) func(int64) string {
	e.t.Helper()
	id, err := e.st.ID(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return func(intent int64) string { return Label(id, fleet, intent, NewNonce()) }
}

// ours lists the simulator's live instances that carry a vastfleet label.
func (e *env) ours() []sim.InstanceState {
	var out []sim.InstanceState
	for _, s := range e.mkt.State() {
		if _, ok := ParseLabel(s.Label); ok && !s.Destroyed {
			out = append(out, s)
		}
	}
	return out
}

// assertNoLeak: every live instance of ours in the simulator is live in the
// store, and no offer was rented twice.
func (e *env) assertNoLeak(st *store.Store) {
	e.t.Helper()
	ctx := context.Background()
	live, err := st.LiveInstances(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []int64
	for _, in := range live {
		ids = append(ids, in.ID)
	}
	for _, s := range e.ours() {
		if !slices.Contains(ids, s.ID) {
			e.t.Errorf("sim instance %d (label %s) is not live in the store", s.ID, s.Label)
		}
	}
	for offer, n := range e.mkt.CreatesPerOffer() {
		if n > 1 {
			e.t.Errorf("offer %d rented %d times", offer, n)
		}
	}
}

// syncBuffer collects a child's output from two pipes at once.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}

// clientOffer reads a simulator offer as the client does, through its
// JSON: the two sides share no offer type.
func clientOffer(t *testing.T, o sim.Offer) market.Offer {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var out market.Offer
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
