package cli

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestCostReconcile: cost --reconcile holds the ledger up against the
// simulator's charges: every instance, running, stopped or destroyed,
// agrees within a cent, line by line, and the totals to the cent; --jq
// reads the JSON, the table names each line's explanation, and --fleet
// with --job is a usage error.
func TestCostReconcile(t *testing.T) {
	e := newEnv(t)
	var ids []string
	for _, q := range []string{"gpu_name=RTX_3090", "gpu_name=RTX_4090", "gpu_name=RTX_3090 num_gpus=2"} {
		inst := decode[map[string]any](t, e.ok("rent", e.cheapestOffer(q), "--image", "ubuntu:22.04", "--json").out)
		ids = append(ids, fmt.Sprint(int64(inst["id"].(float64))))
	}
	e.ok("stop", ids[1])
	e.ok("destroy", ids[2], "--yes")
	type line struct {
		Kind        string  `json:"kind"`
		Ledger      float64 `json:"ledger"`
		Charged     float64 `json:"charged"`
		Difference  float64 `json:"difference"`
		Explanation string  `json:"explanation"`
	}
	rep := decode[struct {
		Instances []struct {
			ID         int64   `json:"id"`
			Known      bool    `json:"known"`
			Lines      []line  `json:"lines"`
			Difference float64 `json:"difference"`
			Agrees     bool    `json:"agrees"`
		} `json:"instances"`
		Total struct {
			Ledger, Charged, Difference float64
		} `json:"total"`
	}](t, e.ok("cost", "--reconcile", "--json").out)
	if len(rep.Instances) != 3 {
		t.Fatalf("%d instances reconciled, want 3: %+v", len(rep.Instances), rep)
	}
	for _, in := range rep.Instances {
		if !in.Known || !in.Agrees || len(in.Lines) != 3 {
			t.Errorf("instance %d: %+v", in.ID, in)
		}
		for _, l := range in.Lines {
			t.Logf("%d %-9s ledger $%.6f charged $%.6f %+.6f %s", in.ID, l.Kind, l.Ledger, l.Charged, l.Difference, l.Explanation)
		}
	}
	if rep.Total.Charged <= 0 || math.Round(rep.Total.Ledger*100) != math.Round(rep.Total.Charged*100) && math.Abs(rep.Total.Difference) >= 0.005 {
		t.Errorf("totals: %+v, want the same cents", rep.Total)
	}
	if out := e.ok("cost", "--reconcile", "--jq", ".instances | length").out; strings.TrimSpace(out) != "3" {
		t.Errorf("--jq: %q", out)
	}
	table := e.ok("cost", "--reconcile").out
	for _, want := range []string{"LEDGER", "CHARGED", "compute", "storage", "bandwidth", "rounding", "TOTAL", "0 of 3 instances differ"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if r := e.fails("cost", "--reconcile", "--fleet", "a", "--job", "b"); r.code != 2 {
		t.Errorf("--fleet with --job: exit %d (%s), want 2", r.code, r.err)
	}
	if r := e.fails("cost", "--reconcile", "--job", "nosuch"); !strings.Contains(r.err, `"nosuch": no instances`) {
		t.Errorf("--job of nothing: %q", r.err)
	}
}
