package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The pricing flags and --new print what `vastai search offers` sends:
// the aliases write one field, so the last one given wins, -t is passed
// through unvalidated (interruptible becomes bid), and --new wraps the
// body for PUT /api/v0/search/asks/.
func TestQueryParsePricingFlagsAndNewForm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "on-demand"},
		{[]string{"-b"}, "bid"},
		{[]string{"--bid"}, "bid"},
		{[]string{"-i"}, "bid"},
		{[]string{"--interruptible"}, "bid"},
		{[]string{"-r"}, "reserved"},
		{[]string{"-d"}, "on-demand"},
		{[]string{"-t", "interruptible"}, "bid"},
		{[]string{"-t", "spot-ish"}, "spot-ish"},
		{[]string{"-b", "-r"}, "reserved"},
		{[]string{"-r", "-b"}, "bid"},
		{[]string{"-t", "reserved", "-d"}, "on-demand"},
		{[]string{"-d", "-t", "bid"}, "bid"},
		{[]string{"-ri"}, "bid"},
	} {
		args := append(append([]string{"query", "parse", "-n"}, c.args...), "num_gpus=1")
		r := e.ok(args...)
		if got := decode[map[string]any](t, r.out)["type"]; got != c.want {
			t.Errorf("%v: type %v, want %q", c.args, got, c.want)
		}
		if !strings.HasPrefix(r.err, "POST /api/v0/bundles/\n") {
			t.Errorf("%v: stderr %q, want the method and path", c.args, r.err)
		}
	}
	r := e.ok("query", "parse", "-n", "--new", "-b", "--limit", "3", "num_gpus=1")
	if !strings.HasPrefix(r.err, "PUT /api/v0/search/asks/\n") {
		t.Errorf("--new: stderr %q", r.err)
	}
	want := decode[map[string]any](t, `{"select_cols": ["*"], "q": {
		"num_gpus": {"eq": "1"}, "order": [["score", "desc"]], "type": "bid", "limit": 3, "allocated_storage": 5.0}}`)
	if diff := cmp.Diff(want, decode[map[string]any](t, r.out)); diff != "" {
		t.Errorf("--new body (-want +got):\n%s", diff)
	}
	if r := e.run("query", "parse", "--bid=false", "num_gpus=1"); r.code != 2 {
		t.Errorf("--bid=false: exit %d, want 2 (usage)", r.code)
	}
	// launch refuses to rank at prices it does not rent at: -i (bid
	// prices) without --bid would rent on demand.
	if r := e.run("launch", "-i", "--count", "1", "num_gpus=1"); r.code != 2 || !strings.Contains(r.err, "on demand") || !strings.Contains(r.err, "--bid min") {
		t.Errorf("launch -i: exit %d (%s), want 2 naming --bid", r.code, r.err)
	}
	// launch's --bid takes a price: search's bare -b is no flag of launch.
	if r := e.run("launch", "-b", "--count", "1", "num_gpus=1"); r.code != 2 {
		t.Errorf("launch -b: exit %d (%s), want 2", r.code, r.err)
	}
}

// Searches against the simulator over loopback: --new finds the same
// offers as the POST form, and -b lists them at bid prices.
func TestSearchNewFormAndBidPricing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	query := []string{"-n", "--limit", "20", "-o", "id", "rentable=True num_gpus=1"}
	ids := func(rows []map[string]any) []float64 {
		var out []float64
		for _, o := range rows {
			out = append(out, o["id"].(float64))
		}
		return out
	}
	plain := decode[[]map[string]any](t, e.ok(append([]string{"search", "--json"}, query...)...).out)
	wrapped := decode[[]map[string]any](t, e.ok(append([]string{"search", "--json", "--new"}, query...)...).out)
	if len(plain) == 0 || !cmp.Equal(ids(plain), ids(wrapped)) {
		t.Fatalf("--new found %v, the POST form %v", ids(wrapped), ids(plain))
	}
	bids := decode[[]map[string]any](t, e.ok(append([]string{"search", "--json", "-b"}, query...)...).out)
	onDemand := map[float64]float64{}
	for _, o := range plain {
		onDemand[o["id"].(float64)] = o["dph_total"].(float64)
	}
	cheaper := 0
	for _, o := range bids {
		if o["is_bid"] != true {
			t.Errorf("offer %v from a -b search is not marked is_bid", o["id"])
		}
		if d, ok := onDemand[o["id"].(float64)]; ok && o["dph_total"].(float64) < d {
			cheaper++
		}
	}
	if cheaper == 0 {
		t.Errorf("no offer cheaper at bid pricing: %v", bids)
	}
	explain := e.ok(append([]string{"search", "--explain", "--new"}, query...)...).out
	if !strings.Contains(explain, `query sent (PUT /api/v0/search/asks/): {"select_cols":["*"],"q":{`) {
		t.Errorf("--explain --new does not show the wrapped body:\n%s", explain)
	}
}
