package cli

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/sim"
)

// sim depth prints each seed's depth beside the published table, as the
// calibration test computes it; bad --seeds are refused.
func TestSimDepth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.ok("sim", "depth", "--seeds", "1-2", "--json")
	var rows []sim.DepthComparison
	if err := json.Unmarshal([]byte(r.out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if len(rows) != 12 {
		t.Fatalf("%d rows for 2 seeds × 6 depths, want 12", len(rows))
	}
	for _, row := range rows {
		if row.PubVCPU == 0 || row.VCPU == 0 || row.Seed < 1 || row.Seed > 2 {
			t.Errorf("row %+v", row)
		}
		if want := math.Round(1000*(row.VCPU/row.PubVCPU-1)) / 10; row.VCPUDevPct != want {
			t.Errorf("seed %d top %d: vcpu_dev_pct %v, want %v", row.Seed, row.N, row.VCPUDevPct, want)
		}
	}
	for _, k := range []string{`"published_ram_gb"`, `"dph_dev_pct"`, `"n"`} {
		if !strings.Contains(r.out, k) {
			t.Errorf("JSON lacks %s", k)
		}
	}
	table := e.ok("sim", "depth", "--seeds", "3")
	if !strings.Contains(table.out, "PUBLISHED") || strings.Count(table.out, "\n") != 7 {
		t.Errorf("table:\n%s", table.out)
	}
	for _, bad := range []string{"x", "5-1", "1,,2"} {
		if f := e.fails("sim", "depth", "--seeds", bad); f.code != 2 || !strings.Contains(f.err, "--seeds") {
			t.Errorf("--seeds %q: exit %d %q", bad, f.code, f.err)
		}
	}
}
