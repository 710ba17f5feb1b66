package vast

import (
	"cmp"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
)

// capServer is a search endpoint written apart from the client's query
// code: it reads dph_total and id bounds from the POSTed body, orders by
// dph_total or id as asked (or not at all), and answers at most max offers
// whatever limit the client asks for, as a server capping answers does.
// unordered ignores the cheapest-first order a sweep asks its slices in.
type capServer struct {
	offers    []map[string]any
	max       int
	unordered bool
}

func (s *capServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Limit int                       `json:"limit"`
		Order [][2]string               `json:"order"`
		F     map[string]map[string]any `json:"-"`
	}
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	json.Unmarshal(body["limit"], &q.Limit)
	json.Unmarshal(body["order"], &q.Order)
	bound := func(field string) map[string]float64 {
		var raw map[string]any
		json.Unmarshal(body[field], &raw)
		out := map[string]float64{}
		for op, v := range raw {
			switch x := v.(type) {
			case float64:
				out[op] = x
			case string:
				out[op], _ = strconv.ParseFloat(x, 64)
			}
		}
		return out
	}
	ok := func(b map[string]float64, v float64) bool {
		for op, x := range b {
			if op == "gte" && v < x || op == "gt" && v <= x || op == "lte" && v > x || op == "lt" && v >= x || op == "eq" && v != x {
				return false
			}
		}
		return true
	}
	price, ids := bound("dph_total"), bound("id")
	var out []map[string]any
	for _, o := range s.offers {
		if ok(price, o["dph_total"].(float64)) && ok(ids, o["id"].(float64)) {
			out = append(out, o)
		}
	}
	if len(q.Order) > 0 && !(s.unordered && q.Order[0] == [2]string{"dph_total", "asc"}) {
		col, desc := q.Order[0][0], q.Order[0][1] == "desc"
		slices.SortStableFunc(out, func(a, b map[string]any) int {
			c := cmp.Compare(a[col].(float64), b[col].(float64))
			if desc {
				c = -c
			}
			return c
		})
	}
	n := min(len(out), s.max)
	if q.Limit > 0 {
		n = min(n, q.Limit)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"offers": out[:n]})
}

// A server that answers at most 300 (or 317) offers while the client asks
// for pages of 1,000 must not make a sweep return 300 offers and no error:
// the sweep notices the cap and narrows until every slice is below it.
func TestSweepThroughAServerThatCapsAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		max       int
		unordered bool
	}{
		{"capped at 300", 300, false},
		{"capped at 317", 317, false},
		{"capped at 300, unordered", 300, true},
		{"capped at 317, unordered", 317, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, uint64(tc.max)))
			s := &capServer{max: tc.max, unordered: tc.unordered}
			for i := range 2000 {
				// Prices in cents, many shared: ties at a slice's edge too.
				s.offers = append(s.offers, map[string]any{"id": float64(1000 + i), "dph_total": float64(rng.IntN(400)) / 100, "num_gpus": 1.0})
			}
			rng.Shuffle(len(s.offers), func(i, j int) { s.offers[i], s.offers[j] = s.offers[j], s.offers[i] })
			srv := httptest.NewServer(s)
			t.Cleanup(srv.Close)
			c, err := New(Options{BaseURL: srv.URL, APIKey: testKey})
			if err != nil {
				t.Fatal(err)
			}
			q, _, err := market.Parse("num_gpus=1", market.ParseOptions{NoDefault: true})
			if err != nil {
				t.Fatal(err)
			}
			got, reqs, err := provider.SweepOffers(context.Background(), c, q, provider.DefaultSweepPage)
			if err != nil {
				t.Fatalf("sweep: %v (%d offers, %d requests)", err, len(got), reqs)
			}
			if len(got) != len(s.offers) {
				t.Fatalf("sweep returned %d of %d offers with no error (%d requests)", len(got), len(s.offers), reqs)
			}
			t.Logf("%d offers in %d requests", len(got), reqs)
		})
	}
}
