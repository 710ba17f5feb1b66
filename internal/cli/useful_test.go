package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/store"
)

// search --by useful --explain shows the terms of the expected price of a
// useful node, and a machine on the data dir's bad-host list has no chance
// of one: it ranks behind every offer that has some, with p_useful 0.
func TestSearchByUsefulExplainsTermsAndHeedsBadHosts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := "rentable=True inet_down>=200 reliability>0.95"
	out := e.ok("search", "--by", "useful", "--limit", "5", "-n", q, "--explain").out
	for _, term := range []string{"score: useful", "dph_total=", "load_s=", "p_fault=", "p_on_time=", "p_kept=", "p_useful=", "boot_waste=", "fail_waste=", "cost_per_useful_node="} {
		if !strings.Contains(out, term) {
			t.Fatalf("--explain lacks %q:\n%s", term, out)
		}
	}
	ranked := decode[[]market.Ranked](t, e.ok("search", "--by", "useful", "--limit", "5", "-n", q, "--json").out)
	if len(ranked) < 2 || ranked[0].Score <= 0 {
		t.Fatalf("ranked %+v", ranked)
	}
	top := ranked[0]
	st, err := store.Open(t.Context(), filepath.Join(e.home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	err = st.MarkBadHost(t.Context(), store.BadHost{MachineID: top.MachineID, Reason: "test", FailedAt: time.Unix(0, 0), Until: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	again := decode[[]market.Ranked](t, e.ok("search", "--by", "useful", "--all", "-n", q, "--json").out)
	for i, r := range again {
		if r.MachineID != top.MachineID {
			continue
		}
		// Behind every offer with some chance of a useful node.
		if r.Score != 0 || (i+1 < len(again) && again[i+1].Score > 0) {
			t.Fatalf("offer %d on a bad machine ranks %d of %d with score %v", r.ID, i+1, len(again), r.Score)
		}
	}
	if again[0].MachineID == top.MachineID {
		t.Fatalf("the bad machine still ranks first")
	}
}
