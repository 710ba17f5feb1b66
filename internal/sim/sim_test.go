package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
)

const testKey = "test-key"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type harness struct {
	t     *testing.T
	m     *Market
	clock *clock.Manual
	srv   *httptest.Server
	key   string
	base  string // the server's URL when it is not srv
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	clk := clock.NewManual(t0)
	if cfg.Clock == nil {
		cfg.Clock = clk
	} else {
		clk = cfg.Clock.(*clock.Manual)
	}
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	if cfg.Offers == 0 {
		cfg.Offers = 800
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	return &harness{t: t, m: m, clock: clk, srv: srv, key: cfg.APIKey}
}

// do sends one request the way the real client does and decodes a JSON
// answer into out (when non-nil).
func (h *harness) do(method, path string, body any, out any) (int, http.Header, []byte) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	base, client := h.base, http.DefaultClient
	if h.srv != nil {
		base, client = h.srv.URL, h.srv.Client()
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			h.t.Fatalf("%s %s: Content-Type %q, body %s", method, path, ct, b)
		}
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
	return resp.StatusCode, resp.Header, b
}

func (h *harness) search(q string) []market.Offer {
	h.t.Helper()
	var out struct{ Offers []market.Offer }
	st, _, b := h.do("POST", "/api/v0/bundles/", json.RawMessage(q), &out)
	if st != 200 {
		h.t.Fatalf("search: %d %s", st, b)
	}
	return out.Offers
}

func (h *harness) create(offerID int64, label string) int64 {
	h.t.Helper()
	var out provider.Created
	st, _, b := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", offerID), map[string]any{
		"client_id": "me", "image": "pytorch/pytorch:latest", "disk": 20, "label": label,
		"env": map[string]string{"A": "1"}, "runtype": "ssh_direc ssh_proxy", "price": nil,
	}, &out)
	if st != 200 || !out.Success || out.NewContract == 0 {
		h.t.Fatalf("create %d: %d %s", offerID, st, b)
	}
	return out.NewContract
}

func (h *harness) show(id int64) *provider.Instance {
	h.t.Helper()
	var out struct {
		Instances *provider.Instance `json:"instances"`
	}
	if st, _, b := h.do("GET", fmt.Sprintf("/api/v0/instances/%d/?owner=me", id), nil, &out); st != 200 {
		h.t.Fatalf("show: %d %s", st, b)
	}
	return out.Instances
}

func (h *harness) setState(id int64, state string) {
	h.t.Helper()
	var out struct{ Success bool }
	if st, _, b := h.do("PUT", fmt.Sprintf("/api/v0/instances/%d/", id), map[string]string{"state": state}, &out); st != 200 || !out.Success {
		h.t.Fatalf("state %s: %d %s", state, st, b)
	}
}

func (h *harness) stateOf(id int64) InstanceState {
	for _, s := range h.m.State() {
		if s.ID == id {
			return s
		}
	}
	h.t.Fatalf("no instance %d", id)
	return InstanceState{}
}

// cheapOffer is a rentable offer with a known price, for timelines.
func (h *harness) cheapOffer() market.Offer {
	offers := h.search(`{"rentable":{"eq":true},"num_gpus":{"eq":"1"},"inet_down":{"gte":"500"},"order":[["dph_total","asc"]],"type":"on-demand","allocated_storage":20,"limit":1}`)
	if len(offers) != 1 {
		h.t.Fatal("no cheap offer")
	}
	return offers[0]
}

func TestSearchFiltersOrdersAndCaps(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 1})
	offers := h.search(`{"gpu_name":{"eq":"RTX 3090"},"rentable":{"eq":true},"order":[["dph_total","asc"]],"type":"on-demand","allocated_storage":5,"limit":10}`)
	if len(offers) != 10 {
		t.Fatalf("got %d offers, want 10", len(offers))
	}
	for i, o := range offers {
		if o.GPUName != "RTX 3090" {
			t.Errorf("offer %d is %s", o.ID, o.GPUName)
		}
		if i > 0 && o.DPHTotal < offers[i-1].DPHTotal {
			t.Errorf("not ascending at %d", i)
		}
		if want := o.DPHBase + o.StorageCost*5/730; math.Abs(o.DPHTotal-want) > 1e-9 {
			t.Errorf("dph_total %v, want base+storage %v", o.DPHTotal, want)
		}
	}
	if n := len(h.search(`{"order":[],"type":"on-demand","allocated_storage":5}`)); n != DefaultResultCap {
		t.Errorf("no limit gave %d offers, want the default cap %d", n, DefaultResultCap)
	}
	// The --new form wraps the same body.
	var wrapped struct{ Offers []market.Offer }
	h.do("PUT", "/api/v0/search/asks/", map[string]any{"select_cols": []string{"*"}, "q": json.RawMessage(`{"gpu_name":{"eq":"RTX 3090"},"rentable":{"eq":true},"order":[["dph_total","asc"]],"type":"on-demand","allocated_storage":5,"limit":10}`)}, &wrapped)
	if len(wrapped.Offers) != 10 || wrapped.Offers[0].ID != offers[0].ID {
		t.Errorf("search/asks gave a different answer")
	}
	// Bid searches price compute at min_bid.
	bids := h.search(`{"gpu_name":{"eq":"RTX 3090"},"order":[["dph_total","asc"]],"type":"bid","allocated_storage":5,"limit":3}`)
	for _, o := range bids {
		if math.Abs(o.DPHTotal-(o.MinBid+o.StorageTotalCost)) > 1e-9 || !o.IsBid {
			t.Errorf("bid offer %d: dph_total %v, min_bid %v", o.ID, o.DPHTotal, o.MinBid)
		}
	}
	var e struct{ Error, Msg string }
	if st, _, _ := h.do("POST", "/api/v0/bundles/", json.RawMessage(`{"no_such_field":{"eq":"1"},"order":[],"type":"on-demand","allocated_storage":5}`), &e); st != 400 || e.Error != "invalid_args" {
		t.Errorf("unknown field: %d %+v", st, e)
	}
}

func TestCreateBootsToRunningAndHoldsTheOffer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 2})
	o := h.cheapOffer()
	id := h.create(o.ID, "vf-test-1")
	in := h.show(id)
	if in == nil || in.ActualStatus != nil || in.IntendedStatus != "running" || in.LabelText() != "vf-test-1" {
		t.Fatalf("fresh instance: %+v", in)
	}
	if len(in.ExtraEnv) != 1 || in.ExtraEnv[0][0] != "A" || in.StartDate != float64(t0.Unix()) {
		t.Errorf("extra_env %v start_date %v", in.ExtraEnv, in.StartDate)
	}
	h.clock.Advance(11 * time.Second)
	if in = h.show(id); in.Status() != provider.StateLoading || in.Ports != nil {
		t.Fatalf("after 11 s: %q ports %v", in.Status(), in.Ports)
	}
	ready := h.stateOf(id).ReadyAt
	// 8 GB over the offer's link, unpacked at its disk's pace, plus
	// 10–60 s of setup.
	if boot := ready.Sub(t0); boot < 20*time.Second || boot > time.Duration((8*8000/o.InetDown+market.ExtractSeconds(8, o.DiskBW))*float64(time.Second))+71*time.Second {
		t.Errorf("boot took %v on a %v Mb/s link", boot, o.InetDown)
	}
	h.clock.Set(ready)
	in = h.show(id)
	if in.Status() != provider.StateRunning || in.Ports["22/tcp"][0].HostPort == "" || in.PublicIPAddr == "" {
		t.Fatalf("at ready time: %q %+v", in.Status(), in.Ports)
	}
	// The offer is held: not rentable, and a second create is refused.
	if got := h.search(fmt.Sprintf(`{"id":{"eq":"%d"},"rentable":{"eq":true},"order":[],"type":"on-demand","allocated_storage":5}`, o.ID)); len(got) != 0 {
		t.Errorf("held offer still listed as rentable")
	}
	var e struct {
		Success bool
		Error   string
	}
	if st, _, _ := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", o.ID), map[string]any{"image": "ubuntu:22.04", "disk": 10}, &e); st != 404 || e.Error != "no_such_ask" {
		t.Errorf("second create: %d %+v", st, e)
	}
	var ok struct{ Success bool }
	if st, _, _ := h.do("DELETE", fmt.Sprintf("/api/v0/instances/%d/", id), map[string]any{}, &ok); st != 200 || !ok.Success {
		t.Fatalf("destroy: %d", st)
	}
	if h.show(id) != nil {
		t.Errorf("destroyed instance still shown")
	}
	if st, _, _ := h.do("DELETE", fmt.Sprintf("/api/v0/instances/%d/", id), map[string]any{}, &e); st != 404 || e.Error != "no_such_instance" {
		t.Errorf("destroy twice: %d %+v", st, e)
	}
	if got := h.search(fmt.Sprintf(`{"id":{"eq":"%d"},"rentable":{"eq":true},"order":[],"type":"on-demand","allocated_storage":5}`, o.ID)); len(got) != 1 {
		t.Errorf("offer did not come back after destroy")
	}
	if c := h.m.CreatesPerOffer()[o.ID]; c != 1 {
		t.Errorf("creates for offer: %d", c)
	}
}

func TestLedgerForScriptedTimeline(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 3})
	o := h.cheapOffer()
	id := h.create(o.ID, "ledger")
	ready := h.stateOf(id).ReadyAt
	h.clock.Set(ready.Add(time.Hour)) // run 1 h
	h.setState(id, "stopped")
	h.clock.Advance(2 * time.Hour) // stopped 2 h
	h.setState(id, "running")
	ready2 := h.stateOf(id).ReadyAt
	if ready2.IsZero() || ready2.Sub(h.clock.Now()) > 41*time.Second {
		t.Fatalf("restart ready at %v", ready2)
	}
	h.clock.Set(ready2.Add(30 * time.Minute)) // run 30 min
	end := h.clock.Now()
	var ok struct{ Success bool }
	h.do("DELETE", fmt.Sprintf("/api/v0/instances/%d/", id), map[string]any{}, &ok)
	h.clock.Advance(time.Hour) // nothing bills after destroy

	storageRate := o.StorageCost * 20 / 730
	want := map[string]float64{
		"compute":   o.DPHBase * 1.5,
		"storage":   storageRate * end.Sub(t0).Hours(),
		"bandwidth": o.InetDownCost * 8,
	}
	got := map[string]float64{}
	for _, e := range h.m.Ledger() {
		if e.InstanceID != id || e.OfferID != o.ID {
			t.Errorf("entry for %d/%d", e.InstanceID, e.OfferID)
		}
		got[e.Kind] += e.Amount
	}
	total := 0.0
	for k, w := range want {
		if math.Abs(got[k]-w) > 0.005 {
			t.Errorf("%s: charged $%.4f, want $%.4f", k, got[k], w)
		}
		total += w
	}
	if s := h.m.Spend(id); math.Abs(s-total) > 0.005 {
		t.Errorf("spend %.4f, want %.4f", s, total)
	}
	if b := h.m.Balance(); math.Abs(b-(DefaultBalance-total)) > 0.005 {
		t.Errorf("balance %.4f, want %.4f", b, DefaultBalance-total)
	}
	var user provider.User
	h.do("GET", "/api/v0/users/current", nil, &user)
	if math.Abs(user.Balance-(DefaultBalance-total)) > 0.005 {
		t.Errorf("users/current balance %.4f", user.Balance)
	}
}

func TestLostCreateAppliesAndDropsConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 4, Faults: Faults{LostCreate: 1}})
	o := h.cheapOffer()
	b, _ := json.Marshal(map[string]any{"image": "ubuntu:22.04", "disk": 10, "label": "lost"})
	req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/api/v0/asks/%d/", h.srv.URL, o.ID), bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := h.srv.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got a response (%d), want a dropped connection", resp.StatusCode)
	}
	inst := h.m.Instances()
	if len(inst) != 1 || inst[0].Label == nil || *inst[0].Label != "lost" {
		t.Fatalf("create not applied: %+v", inst)
	}
}

func TestRateLimitHasNoRetryAfter(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 5, Faults: Faults{Rate429: 1}})
	st, hdr, body := h.do("GET", "/api/v0/users/current", nil, nil)
	if st != 429 || hdr.Get("Retry-After") != "" || !strings.Contains(string(body), "API requests too frequent") {
		t.Fatalf("got %d %q Retry-After=%q", st, body, hdr.Get("Retry-After"))
	}
	// Follow-up pages of the v1 listing are never refused.
	if st, _, b := h.do("GET", "/api/v1/instances/?limit=25&after_token="+encodeToken(0), nil, nil); st != 200 {
		t.Errorf("follow-up page: %d %s", st, b)
	}
	h2 := newHarness(t, Config{Seed: 5, Faults: Faults{Rate429: 1, RetryAfter: 3 * time.Second}})
	if _, hdr, _ := h2.do("GET", "/api/v0/users/current", nil, nil); hdr.Get("Retry-After") != "3" {
		t.Errorf("Retry-After %q, want 3", hdr.Get("Retry-After"))
	}
}

type listPage struct {
	Success        bool                `json:"success"`
	InstancesFound int                 `json:"instances_found"`
	TotalInstances int                 `json:"total_instances"`
	LabelCounts    map[string]int      `json:"label_counts"`
	NextToken      *string             `json:"next_token"`
	Instances      []provider.Instance `json:"instances"`
}

func TestV1ListingPaginates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 6})
	offers := h.search(`{"rentable":{"eq":true},"order":[["dph_total","asc"]],"type":"on-demand","allocated_storage":20,"limit":30}`)
	for i, o := range offers {
		h.create(o.ID, fmt.Sprintf("fleet-%d", i%2))
	}
	var p listPage
	h.do("GET", "/api/v1/instances/?limit=25&order_by="+url.QueryEscape(`[{"col":"id","dir":"asc"}]`), nil, &p)
	if len(p.Instances) != 25 || p.TotalInstances != 30 || p.NextToken == nil || p.LabelCounts["fleet-0"] != 15 {
		t.Fatalf("page 1: %d rows, total %d, next %v, counts %v", len(p.Instances), p.TotalInstances, p.NextToken, p.LabelCounts)
	}
	seen := map[int64]bool{}
	for _, in := range p.Instances {
		seen[in.ID] = true
	}
	var p2 listPage
	h.do("GET", "/api/v1/instances/?limit=25&after_token="+url.QueryEscape(*p.NextToken), nil, &p2)
	if len(p2.Instances) != 5 || p2.NextToken != nil || p2.TotalInstances != 30 {
		t.Fatalf("page 2: %d rows next %v", len(p2.Instances), p2.NextToken)
	}
	for _, in := range p2.Instances {
		if seen[in.ID] {
			t.Errorf("row %d on both pages", in.ID)
		}
	}
	var small listPage
	h.do("GET", "/api/v1/instances/?limit=0", nil, &small)
	if len(small.Instances) != 5 {
		t.Errorf("limit=0 gave %d rows, want 5", len(small.Instances))
	}
	var f listPage
	h.do("GET", "/api/v1/instances/?select_filters="+url.QueryEscape(`{"label":{"eq":"fleet-1"}}`), nil, &f)
	if f.TotalInstances != 15 {
		t.Errorf("label filter: total %d", f.TotalInstances)
	}
	var e struct{ Error, Msg string }
	if st, _, _ := h.do("GET", "/api/v1/instances/?after_token=garbage", nil, &e); st != 400 {
		t.Errorf("bad token: %d", st)
	}
	if st, _, _ := h.do("GET", "/api/v1/instances/?select_filters="+url.QueryEscape(`{"dph_total":{"lt":1}}`), nil, &e); st != 400 || !strings.Contains(e.Msg, "is not a valid search key") {
		t.Errorf("computed column filter: %d %+v", st, e)
	}
}

func TestAuthFailures(t *testing.T) {
	t.Parallel()
	for _, as404 := range []bool{false, true} {
		h := newHarness(t, Config{Seed: 7, Faults: Faults{AuthAs404: as404}})
		h.key = "wrong"
		var e struct {
			Success bool
			Error   string
			Msg     string
		}
		st, _, _ := h.do("GET", "/api/v1/instances/", nil, &e)
		want := 401
		if as404 {
			want = 404
		}
		if st != want || e.Error != "auth_error" || e.Msg != "Invalid user key" || e.Success {
			t.Errorf("as404=%v: %d %+v", as404, st, e)
		}
		// The GPU name list needs no key.
		var names struct {
			GPUNames []string `json:"gpu_names"`
		}
		if st, _, _ := h.do("GET", "/api/v0/gpu_names/unique/", nil, &names); st != 200 || len(names.GPUNames) == 0 {
			t.Errorf("gpu names: %d", st)
		}
	}
}

// TestStartWaitsWhileOwnInstanceHoldsTheGPU: a start whose GPU another of
// the account's instances took waits in Scheduling for as long as that one
// holds it, and loads as soon as it is destroyed.
func TestStartWaitsWhileOwnInstanceHoldsTheGPU(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 8})
	o := h.cheapOffer()
	a := h.create(o.ID, "a")
	h.clock.Set(h.stateOf(a).ReadyAt)
	h.setState(a, "stopped")
	if in := h.show(a); in.Status() != "stopped" || in.IntendedStatus != "stopped" {
		t.Fatalf("after stop: %q/%q", in.Status(), in.IntendedStatus)
	}
	h.clock.Advance(time.Minute)
	b := h.create(o.ID, "b") // the stopped instance gave up its GPU
	h.setState(a, "running")
	for range 3 {
		h.clock.Advance(time.Hour)
		in := h.show(a)
		if in.Status() != "stopped" || in.IntendedStatus != "running" || !strings.Contains(in.StatusMsg, "Scheduling") {
			t.Fatalf("start of a taken instance: %q/%q %q", in.Status(), in.IntendedStatus, in.StatusMsg)
		}
	}
	if st, _, body := h.do("DELETE", fmt.Sprintf("/api/v0/instances/%d/", b), nil, nil); st != 200 {
		t.Fatalf("destroy %d: %d %s", b, st, body)
	}
	if in := h.show(a); in.Status() != "loading" {
		t.Fatalf("after the holder went: %q %q, want loading", in.Status(), in.StatusMsg)
	}
}

func TestBalanceExhaustionStopsInstances(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 9, Balance: 2})
	o := h.cheapOffer()
	id := h.create(o.ID, "poor")
	h.clock.Advance(1000 * time.Hour)
	in := h.show(id)
	if in == nil || in.Status() != "stopped" {
		t.Fatalf("after the money ran out: %+v", in)
	}
	if b := h.m.Balance(); b > 0 {
		t.Errorf("balance %v", b)
	}
}

func TestLogs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 10})
	id := h.create(h.cheapOffer().ID, "logs")
	var out struct {
		Success   bool
		ResultURL string `json:"result_url"`
	}
	h.do("PUT", fmt.Sprintf("/api/v0/instances/request_logs/%d/", id), map[string]string{"tail": "100"}, &out)
	resp, err := http.Get(out.ResultURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "created") {
		t.Errorf("logs: %d %q", resp.StatusCode, b)
	}
}

func TestPersistenceAndLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := clock.NewManual(t0)
	m, err := Open(dir, Config{Seed: 11, Offers: 500, Clock: clk, APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Config{Seed: 11, Offers: 500, Clock: clk}); err == nil || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second Open: %v", err)
	}
	srv := httptest.NewServer(m.Handler())
	h := &harness{t: t, m: m, clock: clk, srv: srv, key: testKey}
	id := h.create(h.cheapOffer().ID, "persist")
	// Saved before the answer was written, without any Close.
	saved, err := loadState(dir)
	if err != nil || saved == nil || len(saved.Instances) != 1 || saved.Instances[0].Label == nil || *saved.Instances[0].Label != "persist" {
		t.Fatalf("saved state after create: %v", err)
	}
	clk.Advance(time.Hour)
	srv.Close()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	clock2 := clock.NewManual(t0) // a new process starts its clock afresh
	m2, err := Open(dir, Config{Seed: 99, Clock: clock2})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if got := clock2.Now(); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("clock resumed at %v, want %v", got, t0.Add(time.Hour))
	}
	inst := m2.Instances()
	if len(inst) != 1 || inst[0].ID != id || inst[0].Status() != provider.StateRunning {
		t.Fatalf("reopened: %+v", inst)
	}
	if m2.Spend(id) <= 0 {
		t.Errorf("ledger lost")
	}
	if err := Reset(dir); err == nil {
		t.Errorf("Reset while open succeeded")
	}
}

func TestScaledClockContinuesAcrossOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wall := clock.NewManual(t0)
	m, err := Open(dir, Config{Seed: 12, Offers: 200, Clock: clock.NewScaled(t0, wall.Now(), 60, wall)})
	if err != nil {
		t.Fatal(err)
	}
	wall.Advance(10 * time.Second) // 10 sim minutes
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	wall.Advance(5 * time.Second) // down for 5 s: the market kept running
	c := clock.NewScaled(time.Unix(0, 0), wall.Now(), 60, wall)
	m2, err := Open(dir, Config{Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if got, want := c.Now(), t0.Add(15*time.Minute); !got.Equal(want) {
		t.Errorf("sim time %v, want %v", got, want)
	}
}

func TestAdminSurface(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 13})
	id := h.create(h.cheapOffer().ID, "admin")
	resp, err := http.Post(h.srv.URL+"/sim/advance?d=2h", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := h.clock.Now(); !got.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("advance: clock at %v", got)
	}
	var st struct {
		Instances []InstanceState `json:"instances"`
	}
	h.do("GET", "/sim/state", nil, &st)
	if len(st.Instances) != 1 || st.Instances[0].ID != id || st.Instances[0].Status != "running" || st.Instances[0].Spend <= 0 {
		t.Errorf("state: %+v", st.Instances)
	}
	var l struct {
		Entries []LedgerEntry `json:"entries"`
	}
	h.do("GET", "/sim/ledger", nil, &l)
	if len(l.Entries) != 3 { // bandwidth, storage, compute
		t.Errorf("ledger: %+v", l.Entries)
	}
}

func TestRealisticProfileBootShares(t *testing.T) {
	t.Parallel()
	f, err := Profile("realistic")
	if err != nil {
		t.Fatal(err)
	}
	f.RateLimit, f.Rate429, f.Rate5xx, f.LostCreate, f.CreateRace, f.OfferChurnPerHour = 0, 0, 0, 0, 0, 0
	h := newHarness(t, Config{Seed: 14, Offers: DefaultOffers, Faults: f, Balance: 1e6})
	offers := h.search(`{"rentable":{"eq":true},"inet_down":{"gte":"200"},"order":[["dph_total","asc"]],"type":"on-demand","allocated_storage":20,"limit":300}`)
	if len(offers) != 300 {
		t.Fatalf("%d offers", len(offers))
	}
	rented := 0
	for _, o := range offers {
		st, _, b := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", o.ID), map[string]any{"image": "pytorch/pytorch:latest", "disk": 20, "label": "boot"}, nil)
		switch {
		case st == 404 && strings.Contains(string(b), "no_such_ask"):
			// A slice of a machine whose GPUs this account's earlier rents
			// already hold.
		case st != 200:
			t.Fatalf("create %d: %d %s", o.ID, st, b)
		default:
			rented++
		}
	}
	if rented < 280 {
		t.Fatalf("rented %d of the 300 cheapest offers, want nearly all", rented)
	}
	h.clock.Advance(10 * time.Minute)
	running := 0
	for _, in := range h.m.Instances() {
		if in.Status() == provider.StateRunning {
			running++
		}
	}
	share := float64(running) / float64(rented)
	t.Logf("running after 10 min: %d of %d", running, rented)
	if share < 0.63 || share > 0.8 {
		t.Errorf("running after 10 min: %d of %d, want about 73%%", running, rented)
	}
	h.clock.Advance(3 * time.Hour)
	never := 0
	for _, in := range h.m.Instances() {
		if s := in.Status(); s == provider.StateLoading || s == provider.StateExited {
			never++
		}
	}
	if share := float64(never) / float64(rented); share < 0.05 || share > 0.17 {
		t.Errorf("never booted: %d of %d, want about 10%%", never, rented)
	}
}

func TestInstanceFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		faults Faults
		after  time.Duration
		want   string
	}{
		{"stuck", Faults{StuckLoading: 1}, 24 * time.Hour, provider.StateLoading},
		{"bootfail", Faults{BootFail: 1}, time.Hour, provider.StateExited},
		{"offline", Faults{HostOffline: 1}, 6 * time.Hour, provider.StateOffline},
		{"slow", Faults{SlowBoot: 1}, 10 * time.Minute, provider.StateLoading},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{Seed: 15, Faults: tc.faults})
			id := h.create(h.cheapOffer().ID, tc.name)
			h.clock.Advance(tc.after)
			in := h.show(id)
			if in.Status() != tc.want {
				t.Fatalf("after %v: %q (%s), want %q", tc.after, in.Status(), in.StatusMsg, tc.want)
			}
			if tc.want == provider.StateOffline {
				// Offline hosts bill nothing.
				before := h.m.Spend(id)
				h.clock.Advance(10 * time.Hour)
				if after := h.m.Spend(id); after != before {
					t.Errorf("offline instance billed %v", after-before)
				}
			}
		})
	}
}

func TestOfferChurnHidesOffers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 16, Faults: Faults{OfferChurnPerHour: 1}})
	if got := h.search(`{"rentable":{"eq":true},"order":[],"type":"on-demand","allocated_storage":5}`); len(got) != 0 {
		t.Fatalf("%d rentable offers while every offer churned", len(got))
	}
	all := h.search(`{"order":[],"type":"on-demand","allocated_storage":5,"limit":1}`)
	var e struct{ Error string }
	if st, _, _ := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", all[0].ID), map[string]any{"image": "ubuntu:22.04"}, &e); st != 404 || e.Error != "no_such_ask" {
		t.Errorf("create on a churned offer: %d %+v", st, e)
	}
}

func TestBulkCallsAndReboot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 17})
	offers := h.search(`{"rentable":{"eq":true},"order":[["dph_total","asc"]],"type":"on-demand","allocated_storage":20,"limit":3}`)
	var ids []int64
	for _, o := range offers {
		ids = append(ids, h.create(o.ID, "bulk"))
	}
	h.clock.Advance(time.Hour)
	var ok struct{ Success bool }
	if st, _, _ := h.do("PUT", fmt.Sprintf("/api/v0/instances/reboot/%d/", ids[0]), map[string]any{}, &ok); st != 200 || !ok.Success {
		t.Fatalf("reboot: %d", st)
	}
	if s := h.show(ids[0]).Status(); s != provider.StateRebooting {
		t.Errorf("after reboot: %q", s)
	}
	h.clock.Advance(time.Minute)
	if s := h.show(ids[0]).Status(); s != provider.StateRunning {
		t.Errorf("a minute after reboot: %q", s)
	}
	h.do("PUT", "/api/v0/instances/", map[string]any{"state": "stopped", "ids": ids}, &ok)
	for _, id := range ids {
		if s := h.show(id).Status(); s != provider.StateStopped {
			t.Errorf("bulk stop: %d is %q", id, s)
		}
	}
	h.do("DELETE", "/api/v0/instances/", map[string]any{"instance_ids": ids}, &ok)
	if !ok.Success || len(h.m.Instances()) != 0 {
		t.Errorf("bulk destroy left %d", len(h.m.Instances()))
	}
	if st := h.m.State(); len(st) != 3 || !st[0].Destroyed {
		t.Errorf("state lost destroyed instances: %+v", st)
	}
}

func TestBulkCreateRentsEachOfferOnItsOwn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 5})
	offers := h.search(`{"rentable":{"eq":true},"order":[["dph_total","asc"]],"type":"on-demand","allocated_storage":20,"limit":4}`)
	if len(offers) != 4 {
		t.Fatalf("%d offers", len(offers))
	}
	taken := h.create(offers[0].ID, "taken-first")
	ids := []int64{999999999}
	for _, o := range offers {
		ids = append(ids, o.ID)
	}
	var ans struct {
		Success bool
		Results []struct {
			AskID       int64 `json:"ask_id"`
			Success     bool
			NewContract int64 `json:"new_contract"`
			Error       string
		}
	}
	st, _, _ := h.do("POST", "/api/v0/asks/bulk/", map[string]any{"image": "ubuntu:22.04", "disk": 10, "label": "batch", "ids": ids}, &ans)
	if st != 200 || ans.Success || len(ans.Results) != 5 {
		t.Fatalf("bulk create: %d %+v", st, ans)
	}
	made := map[int64]bool{}
	for i, r := range ans.Results {
		if r.AskID != ids[i] {
			t.Errorf("result %d is for offer %d, want %d", i, r.AskID, ids[i])
		}
		wantOK := i >= 2 // the bogus id and the offer rented first are refused
		if r.Success != wantOK || (wantOK && r.NewContract == 0) || (!wantOK && r.Error != "no_such_ask") {
			t.Errorf("offer %d: %+v", r.AskID, r)
		}
		if r.NewContract != 0 {
			made[r.NewContract] = true
		}
	}
	for _, in := range h.m.Instances() {
		if in.ID == taken {
			continue
		}
		if !made[in.ID] || in.Label == nil || *in.Label != "batch" {
			t.Errorf("instance %d (label %v) was not in the answer", in.ID, in.Label)
		}
		delete(made, in.ID)
	}
	if len(made) != 0 {
		t.Errorf("answered contracts with no instance: %v", made)
	}
	var e struct{ Error, Msg string }
	if st, _, _ := h.do("POST", "/api/v0/asks/bulk/", map[string]any{"image": "ubuntu:22.04", "ids": make([]int64, 65)}, &e); st != 400 || e.Error != "invalid_args" {
		t.Errorf("65 ids: %d %+v", st, e)
	}
	if st, _, _ := h.do("POST", "/api/v0/asks/bulk/", map[string]any{"ids": ids[1:2]}, &e); st != 400 || !strings.Contains(e.Msg, "image") {
		t.Errorf("no image: %d %+v", st, e)
	}
}
