package launchsim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// The client's query engine (market.Compile, market.Select) and the
// simulator's evaluator (internal/sim/query.go) are two readings of vast's
// search semantics that share no code. These tests feed both the same
// generated requests over the default market and want the same offers in
// the same order.

// diffColumns are the columns generated queries use, as the client sends
// them (server aliases and GB spellings included), with their kind.
var diffColumns = []struct {
	name, kind string // kind: num, str, bool, geo, version, gb
}{
	{"id", "num"}, {"machine_id", "num"}, {"host_id", "num"},
	{"num_gpus", "num"}, {"gpu_name", "str"}, {"gpu_ram", "num"}, {"gpu_total_ram", "num"}, {"gpu_totalram", "num"},
	{"gpu_frac", "num"}, {"gpu_arch", "str"}, {"gpu_mem_bw", "num"}, {"gpu_max_power", "num"},
	{"compute_cap", "num"}, {"cuda_max_good", "num"}, {"driver_version", "version"}, {"total_flops", "num"}, {"dlperf", "num"},
	{"cpu_arch", "str"}, {"cpu_cores", "num"}, {"cpu_cores_effective", "num"}, {"cpu_ghz", "num"}, {"cpu_ram", "num"},
	{"cpu_ram_GB", "gb"}, {"gpu_ram_GB", "gb"}, {"has_avx", "num"}, {"pci_gen", "num"}, {"pcie_bw", "num"},
	{"disk_space", "num"}, {"disk_bw", "num"}, {"inet_up", "num"}, {"inet_down", "num"}, {"inet_up_cost", "num"}, {"inet_down_cost", "num"},
	{"direct_port_count", "num"}, {"static_ip", "bool"}, {"os_version", "str"}, {"ubuntu_version", "str"},
	{"dph_base", "num"}, {"dph_total", "num"}, {"dphtotal", "num"}, {"min_bid", "num"}, {"storage_cost", "num"},
	{"dlperf_per_dphtotal", "num"}, {"flops_per_dphtotal", "num"}, {"score", "num"},
	{"reliability", "num"}, {"reliability2", "num"}, {"verification", "str"}, {"verified", "bool"}, {"datacenter", "bool"},
	{"rentable", "bool"}, {"external", "bool"}, {"vms_enabled", "bool"}, {"hosting_type", "num"}, {"geolocation", "geo"},
	{"duration", "num"}, {"target_reliability", "num"}, {"rented", "bool"},
}

// diffOrderKeys are real columns (and a server alias) to order by.
var diffOrderKeys = []string{"score", "dph_total", "dphtotal", "num_gpus", "gpu_name", "cpu_cores_effective", "dlperf", "reliability",
	"inet_down", "geolocation", "rentable", "min_bid", "disk_space", "cuda_max_good", "verification", "id"}

var diffOps = []string{"eq", "neq", "gt", "gte", "lt", "lte", "in", "notin"}

// searchServer is a default market served over HTTP with a few offers
// held, so that rentable and rented vary.
type searchServer struct {
	t   *testing.T
	url string
	c   *http.Client
}

func newSearchServer(t *testing.T, seed int64) *searchServer {
	clk := clock.NewManual(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	mkt, err := sim.New(sim.Config{Seed: seed, Clock: clk, IDBase: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mkt.Handler())
	t.Cleanup(srv.Close)
	s := &searchServer{t: t, url: srv.URL, c: srv.Client()}
	for _, o := range s.search(map[string]any{"rentable": map[string]any{"eq": true}, "order": [][2]string{{"dph_total", "asc"}}, "limit": 6}) {
		b, _ := json.Marshal(map[string]any{"image": "ubuntu:22.04", "disk": 10})
		if st, body := s.post("PUT", fmt.Sprintf("/api/v0/asks/%d/", o.ID), b); st != 200 {
			t.Fatalf("create on %d: %d %s", o.ID, st, body)
		}
	}
	return s
}

func (s *searchServer) post(method, path string, body []byte) (int, []byte) {
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

// search posts a body and reads the offers as the client does.
func (s *searchServer) search(body any) []market.Offer {
	s.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		s.t.Fatal(err)
	}
	st, resp := s.post("POST", "/api/v0/bundles/", b)
	if st != 200 {
		s.t.Fatalf("search %s: %d %s", b, st, resp)
	}
	var out struct{ Offers []market.Offer }
	if err := json.Unmarshal(resp, &out); err != nil {
		s.t.Fatal(err)
	}
	return out.Offers
}

// view is every offer the server prices for storage and type, in its
// listing order, read page by page by id.
func (s *searchServer) view(typ string, storage float64) []market.Offer {
	var all []market.Offer
	last := int64(-1)
	for {
		page := s.search(map[string]any{"id": map[string]any{"gt": last}, "order": [][2]string{{"id", "asc"}},
			"limit": sim.MaxResultCap, "type": typ, "allocated_storage": storage})
		all = append(all, page...)
		if len(page) < sim.MaxResultCap {
			return all
		}
		last = page[len(page)-1].ID
	}
}

// genValue draws a value for a column from a real offer (so that terms
// match something), spelled as the CLI or a hand-written body would.
func genValue(r *rand.Rand, kind, name string, o *market.Offer) any {
	num := func(f float64) any {
		if r.IntN(2) == 0 {
			return strconv.FormatFloat(f, 'g', -1, 64) // the CLI sends "2"
		}
		return f
	}
	switch kind {
	case "geo":
		if r.IntN(4) == 0 {
			return o.Geolocation
		}
		return o.Country()
	case "version":
		return o.DriverVersion
	case "gb":
		v, _ := market.FieldValue(o, name[:len(name)-3])
		return num(v.(float64) / 1000)
	case "bool":
		v, _ := market.FieldValue(o, name)
		b, _ := v.(bool)
		switch r.IntN(3) {
		case 0:
			return strconv.FormatBool(b)
		case 1:
			return map[bool]string{true: "True", false: "False"}[b]
		}
		return b
	case "str":
		v, _ := market.FieldValue(o, name)
		return v
	}
	if name == "target_reliability" {
		name = "reliability" // what expected_reliability stands for
	}
	v, _ := market.FieldValue(o, name)
	f := v.(float64)
	if r.IntN(3) == 0 {
		f *= 0.5 + r.Float64() // between offers, not on one
	}
	return num(f)
}

// genQuery draws a request: 1–4 terms, 0–2 order keys, a limit, a type
// and a storage size.
func genQuery(r *rand.Rand, view []market.Offer) market.Query {
	q := market.Query{Filters: map[string]map[string]any{}, Type: []string{"on-demand", "bid"}[r.IntN(2)],
		AllocatedStorage: []float64{5, 5, 40, 200}[r.IntN(4)]}
	for range 1 + r.IntN(4) {
		c := diffColumns[r.IntN(len(diffColumns))]
		op := diffOps[r.IntN(len(diffOps))]
		var val any
		if op == "in" || op == "notin" {
			var l []any
			for range 1 + r.IntN(3) {
				v := genValue(r, c.kind, c.name, &view[r.IntN(len(view))])
				if f, ok := v.(float64); ok {
					v = strconv.FormatFloat(f, 'g', -1, 64) // list items go as strings
				}
				if b, ok := v.(bool); ok {
					v = strconv.FormatBool(b)
				}
				l = append(l, v)
			}
			val = l
		} else {
			val = genValue(r, c.kind, c.name, &view[r.IntN(len(view))])
		}
		if q.Filters[c.name] == nil {
			q.Filters[c.name] = map[string]any{}
		}
		q.Filters[c.name][op] = val
	}
	for range r.IntN(3) {
		q.Order = append(q.Order, [2]string{diffOrderKeys[r.IntN(len(diffOrderKeys))], []string{"asc", "desc"}[r.IntN(2)]})
	}
	if r.IntN(4) > 0 {
		q.Limit = 1 + r.IntN(400)
	}
	return q
}

// TestSearchAgreesWithClientOnGeneratedQueries: 300 generated requests
// (random column, operator and value, order, limit, type and storage)
// over two default markets give the same offers, in the same order, from
// the simulator's server and from the client's engine over the same
// priced listing.
func TestSearchAgreesWithClientOnGeneratedQueries(t *testing.T) {
	t.Parallel()
	n := 150
	if testing.Short() {
		n = 50
	}
	for _, seed := range []int64{1, 2} {
		s := newSearchServer(t, seed)
		views := map[string][]market.Offer{}
		r := rand.New(rand.NewPCG(uint64(seed), 25))
		nonEmpty, refused := 0, 0
		base := s.view("on-demand", 5)
		for i := range n {
			q := genQuery(r, base)
			key := fmt.Sprintf("%s/%g", q.Type, q.AllocatedStorage)
			if views[key] == nil {
				views[key] = s.view(q.Type, q.AllocatedStorage)
			}
			body, err := json.Marshal(q)
			if err != nil {
				t.Fatal(err)
			}
			limit := sim.DefaultResultCap
			if q.Limit > 0 {
				limit = min(q.Limit, sim.MaxResultCap)
			}
			want, err := market.Select(views[key], q, limit)
			if err != nil {
				if st, resp := s.post("POST", "/api/v0/bundles/", body); st != 400 {
					t.Fatalf("seed %d query %d %s: the client refuses it (%v), the simulator answers %d %.200s", seed, i, body, err, st, resp)
				}
				refused++
				continue
			}
			got := s.search(json.RawMessage(body))
			if len(got) > 0 {
				nonEmpty++
			}
			if len(got) != len(want) {
				t.Fatalf("seed %d query %d %s: the simulator answers %d offers, the client's engine %d", seed, i, body, len(got), len(want))
			}
			for j := range got {
				if got[j].ID != want[j].ID {
					t.Fatalf("seed %d query %d %s: offer %d is %d, the client's engine says %d", seed, i, body, j, got[j].ID, want[j].ID)
				}
			}
		}
		// The generator must reach both outcomes, or it tests little.
		if nonEmpty < n/5 || nonEmpty == n {
			t.Errorf("seed %d: %d of %d queries found offers", seed, nonEmpty, n)
		}
		t.Logf("seed %d: %d queries, %d with offers, %d refused by both", seed, n, nonEmpty, refused)
	}
}

// TestSearchRefusesWhatTheClientRefuses: a column neither knows, an
// operator vast has not, and a list under a scalar operator are refused
// by both sides.
func TestSearchRefusesWhatTheClientRefuses(t *testing.T) {
	t.Parallel()
	s := newSearchServer(t, 3)
	for _, body := range []string{
		`{"no_such_column":{"eq":"1"}}`,
		`{"num_gpus":{"between":[1,2]}}`,
		`{"num_gpus":{"eq":["1","2"]}}`,
		`{"gpu_name":{"gt":["RTX 3090"]}}`,
	} {
		var q market.Query
		if err := json.Unmarshal([]byte(body), &q); err != nil {
			t.Fatal(err)
		}
		if _, err := market.Compile(q); err == nil {
			t.Errorf("%s: the client's engine accepts it", body)
		}
		if st, resp := s.post("POST", "/api/v0/bundles/", []byte(body)); st != 400 {
			t.Errorf("%s: the simulator answers %d %s, want 400", body, st, resp)
		}
	}
}
