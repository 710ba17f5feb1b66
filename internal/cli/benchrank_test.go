package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/benchrank"
	"github.com/vastfleet/vastfleet/internal/factory"
)

// bench rank compared unlike things (issue 28): its search --all ratio set
// a simulator of ~1.26 N offers returning every match as JSON against the
// recipe's top-20 table of an N-offer dump, and its search rate used the
// empty query only, the index's best case. Every ratio now compares the
// same dump in the same output form, the simulator's rows carry none, and
// the rate is given for each named query.
func TestBenchRankComparesLikeWithLike(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("the recipe needs python3")
	}
	wd, _ := os.Getwd()
	recipe, err := benchrank.FindRecipe(wd)
	if err != nil {
		t.Skip(err)
	}
	// This test binary runs as vastfleet (TestMain), and so do the
	// processes bench rank starts of itself: no build to wait for.
	cmd := exec.Command(os.Args[0], "--data-dir", t.TempDir(), "bench", "rank", "--recipe", recipe,
		"--offers", "2000", "--pairs", "1", "--seconds", "0.2", "--json")
	cmd.Env = append(os.Environ(), factory.RunAsMainEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench rank: %v\n%s", err, stderr.String())
	}
	var rows []benchrank.Row
	if err := json.Unmarshal(stdout.Bytes(), &rows); err != nil {
		t.Fatalf("%v:\n%s", err, stdout.String())
	}
	every := false
	for _, r := range rows {
		sim := strings.HasPrefix(r.Measure, "simulator")
		if sim && (r.Ratio != 0 || r.Recipe != 0) {
			t.Errorf("%q sets the simulator (another market, another size) against the recipe's dump: ratio %.2f", r.Measure, r.Ratio)
		}
		if strings.Contains(r.Measure, "every match") && r.Ratio > 0 {
			every = true
		}
	}
	if !every {
		t.Errorf("no like-with-like row for printing every match: %+v", rows)
	}
	for _, q := range benchrank.SearchQueries {
		found := false
		for _, r := range rows {
			if strings.HasPrefix(r.Measure, "simulator: searches/s") && strings.Contains(r.Measure, q.Name) && strings.Contains(r.Measure, q.Query) && r.Vastfleet > 0 {
				found = true
			}
		}
		if !found {
			t.Errorf("no search rate for the %s query %q: %+v", q.Name, q.Query, rows)
		}
	}
}
