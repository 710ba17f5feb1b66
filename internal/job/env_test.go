package job

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch/launchsim"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

const testKey = "job-test-key-0123456789"

// env is a job's world on real parts: the simulated market behind the
// real vast client, a real store, a real coordinator (its database and
// HTTP API), all on one manual clock that waits move.
type env struct {
	t      *testing.T
	clock  *clock.Manual
	mkt    *sim.Market
	client *vast.Client
	st     *store.Store
	m      *fleet.Manager
	db     *coord.DB
	cs     *coord.Server
	coord  *httptest.Server
	dir    string
	offers []market.Offer
	events []Event
	mu     sync.Mutex
}

// stepClock is the managers' clock: a wait moves the market's time.
type stepClock struct{ m *clock.Manual }

func (c stepClock) Now() time.Time { return c.m.Now() }
func (c stepClock) Sleep(ctx context.Context, d time.Duration) error {
	c.m.Advance(d)
	return ctx.Err()
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, clock: clock.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), dir: t.TempDir()}
	mkt, err := sim.New(sim.Config{Seed: 3, Offers: 200, Clock: e.clock, APIKey: testKey, IDBase: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.mkt = mkt
	srv := httptest.NewServer(mkt.Handler())
	t.Cleanup(srv.Close)
	if e.client, err = vast.New(vast.Options{BaseURL: srv.URL, APIKey: testKey, Timeout: 5 * time.Second,
		Clock: clock.Stepped{M: e.clock}, Rand: func() float64 { return 0.5 }}); err != nil {
		t.Fatal(err)
	}
	if e.st, err = store.Open(ctx, filepath.Join(e.dir, "state.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.st.Close() })
	e.m = &fleet.Manager{P: e.client, S: e.st, Clock: stepClock{e.clock}, Log: slog.New(slog.DiscardHandler)}
	if e.db, err = coord.OpenDB(ctx, filepath.Join(e.dir, "coord.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.db.Close() })
	// An instance belongs to a fleet when the store has it there: what
	// the agents enroll against. One enrolling that the fleet's cached
	// answer lacks (a replacement) is checked alone, as fleet.Membership
	// does.
	members := storeMembers{e.st}
	cs, err := coord.New(coord.Config{DB: e.db, Clock: e.clock, Log: slog.New(slog.DiscardHandler), Members: members})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	e.cs = cs
	e.coord = httptest.NewServer(cs.Handler())
	t.Cleanup(e.coord.Close)
	machines := map[int64]bool{}
	for _, off := range launchsim.ClientOffers(mkt.Offers()) {
		if off.DiskSpace >= 20 && off.NumGPUs > 0 && !machines[off.MachineID] {
			machines[off.MachineID] = true
			e.offers = append(e.offers, off)
		}
	}
	return e
}

// storeMembers is a fleet's membership as the store has it.
type storeMembers struct{ st *store.Store }

func (m storeMembers) Instances(ctx context.Context, fleetName string) (map[int64]coord.Instance, error) {
	ins, err := m.st.Instances(ctx, store.InstanceFilter{Fleet: fleetName})
	out := map[int64]coord.Instance{}
	for _, in := range ins {
		out[in.ID] = coord.Instance{MachineID: in.MachineID}
	}
	return out, err
}

func (m storeMembers) Instance(ctx context.Context, fleetName string, id int64) (coord.Instance, bool, error) {
	in, err := m.st.Instance(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (in.Fleet != fleetName || !in.Live()) {
		return coord.Instance{}, false, nil
	}
	return coord.Instance{MachineID: in.MachineID}, err == nil, err
}

// rent rents n running instances into fleet id.
func (e *env) rent(id string, n int) []int64 {
	e.t.Helper()
	ctx := context.Background()
	var ids []int64
	for i := range n {
		in, err := e.m.Rent(ctx, fleet.RentRequest{Fleet: id, Offer: e.offers[i],
			Create: provider.CreateRequest{Image: "ubuntu:22.04", Disk: 20, Runtype: "ssh"}})
		if err != nil {
			e.t.Fatal(err)
		}
		if in, err = e.m.WaitRunning(ctx, in.ID, fleet.WaitOptions{}); err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, in.ID)
	}
	return ids
}

// enroll trades fleet's bootstrap token for instance id's credential.
func (e *env) enroll(fleetName string, id int64) string {
	e.t.Helper()
	bootstrap, _, err := e.db.FleetTokens(context.Background(), fleetName)
	if err != nil {
		e.t.Fatal(err)
	}
	var rep wire.EnrollReply
	e.post(bootstrap, wire.PathEnroll, wire.EnrollRequest{Fleet: fleetName, InstanceID: id, Node: "node-0"}, &rep)
	return rep.Token
}

// post sends body to the coordinator with the agent's credential.
func (e *env) post(credential, path string, body, reply any) {
	e.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, e.coord.URL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+credential)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		e.t.Fatalf("POST %s: %s", path, resp.Status)
	}
	if reply != nil && resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(reply); err != nil {
			e.t.Fatal(err)
		}
	}
}

// report has instance id, enrolled in fleet, report findings and finish
// items: the coordinator commits each before it answers.
func (e *env) report(fleetName string, id int64, findings, items, done int) {
	e.t.Helper()
	ctx := context.Background()
	cred := e.enroll(fleetName, id)
	var batch []wire.Finding
	for i := range findings {
		batch = append(batch, wire.Finding{Key: fmt.Sprintf("k%d", i), At: e.clock.Now(), Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	e.post(cred, wire.PathFindings, wire.Findings{Fleet: fleetName, Node: "node-0", Items: batch}, nil)
	var values []string
	for i := range items {
		values = append(values, fmt.Sprint(i))
	}
	if err := e.db.AddItems(ctx, fleetName, values); err != nil {
		e.t.Fatal(err)
	}
	for range done {
		var l wire.ItemLease
		e.post(cred, wire.PathItemsLease, wire.ItemLeaseRequest{Fleet: fleetName, Node: "node-0", Session: "w"}, &l)
		e.post(cred, wire.PathItemsResult, wire.ItemResult{Fleet: fleetName, Node: "node-0", Session: "w", ID: l.Item.ID,
			Lease: l.Lease, At: e.clock.Now()}, nil)
	}
}

func (e *env) deps(nodes Nodes) *Deps {
	return &Deps{Provider: e.client, Store: e.st, Fleet: e.m, Clock: stepClock{e.clock}, Results: e.db, Nodes: nodes,
		Records: &Records{Store: e.st, Dir: filepath.Join(e.dir, "jobs")},
		Events: func(ev Event) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.events = append(e.events, ev)
		}}
}

// live is how many of the market's instances still bill.
func (e *env) live() int {
	n := 0
	for _, s := range e.mkt.State() {
		if !s.Destroyed {
			n++
		}
	}
	return n
}
