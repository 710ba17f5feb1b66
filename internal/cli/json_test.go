package cli

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/vastfleet/vastfleet/internal/benchrank"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/scalebench"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// dataMaps hold data, not field names: their keys are whatever the
// marketplace or the user put there.
var dataMaps = map[string]bool{"ports": true, "env": true}

// snakeKeys reports every object key under v that is not snake_case.
func snakeKeys(v any, path string, bad map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if !snakeCase.MatchString(k) {
				bad[path+"."+k] = true
			}
			if !dataMaps[k] {
				snakeKeys(val, path+"."+k, bad)
			}
		}
	case []any:
		for _, val := range x {
			snakeKeys(val, path+"[]", bad)
		}
	}
}

// Every command that takes --json prints snake_case keys. The test walks
// the whole command tree, so a new --json command must be added here.
func TestEveryJSONCommandSpeaksSnakeCase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	offer := e.cheapestOffer("gpu_name=RTX_3090")
	inst := decode[map[string]any](t, e.ok("rent", offer, "--image", "ubuntu:22.04", "--json").out)
	id := fmt.Sprint(int64(inst["id"].(float64)))
	runs := [][]string{
		{"rent", e.cheapestOffer("gpu_name=RTX_4090"), "--image", "ubuntu:22.04", "--json"},
		{"ssh-url", id, "--json"},
		{"scp-url", id, "--json"},
		{"logs", id, "--json"},
		{"stop", id, "--json"},
		{"start", id, "--json"},
		{"ls", "--json"},
		{"cost", "--json"},
		{"cost", "--reconcile", "--json"},
		{"reconcile", "--json"},
		{"hosts", "--json"},
		{"balance", "--json"},
		{"search", "--limit", "3", "--json"},
		{"market", "depth", "--json"},
		{"sim", "depth", "--seeds", "1", "--json"},
		{"plan", "--model", "7b", "--precision", "bf16", "--train", "--hours", "1", "--json"},
		{"launch", "--count", "2", "--deadline", "30m", "--fleet", "j", "--image", "ubuntu:22.04", "--json", "-n", "rentable=True num_gpus=1 dph_total<1"},
		{"cleanup", "j", "--json"},
		{"bench", "launch", "--count", "3", "--json"},
		{"bench", "offers", "--probe", "echo 1", "--top", "1", "--image", "ubuntu:22.04", "--fleet", "p", "--json"},
		{"version", "--json"},
		{"exec", id, "--json", "--", "true"},
		{"sync", t.TempDir(), "--id", id, "--dest", "project", "--json"},
		{"setup", id, "--phase", "true", "--verify", "echo ok", "--json"},
		{"collect", "--id", id, "--to", t.TempDir(), "--json"},
		{"destroy", id, "--yes", "--json"},
		{"status", "--json"},
		{"serve", "token", "ls", "--json"},
		{"serve", "audit", "--json"},
		{"context", "ls", "--json"},
	}
	// bench rank runs the vastfleet binary and the Python recipe as child
	// processes, which a test binary cannot stand in for; its rows are
	// benchRankRow, checked by the same rule below.
	// up, down and demo run agents, which need a built agent binary (or
	// are the binary): up_test.go, examples_test.go and the README test
	// run them; their report, jobReport, is checked by the rule below.
	// bench scale also runs the binary (cmd/vastfleet's TestBenchScale
	// runs it reduced); its lines are scalebench.Phase and Summary.
	notRun := map[string]bool{"bench rank": true, "bench scale": true, "up": true, "down": true, "demo": true}
	covered := map[string]bool{}
	for _, args := range runs {
		r := e.run(args...)
		// A launch's JSON is checked whether or not it reached its count
		// (exit 3): how many boot in time is not what this test is about.
		if r.code != 0 && !(args[0] == "launch" && r.code == 3) {
			t.Fatalf("vastfleet %s: exit %d\n%s", strings.Join(args, " "), r.code, r.err)
		}
		covered[commandPath(args)] = true
		bad := map[string]bool{}
		for _, line := range jsonValues(t, r.out) {
			snakeKeys(line, "", bad)
		}
		if len(bad) > 0 {
			keys := make([]string, 0, len(bad))
			for k := range bad {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			t.Errorf("vastfleet %s --json: keys not snake_case: %v", strings.Join(args, " "), keys)
		}
	}
	one, half := 1, 0.5
	for name, v := range map[string]any{"bench rank": benchrank.Row{},
		"bench scale phase":   scalebench.Phase{MemAvailableMinMB: &half, Usage: []scalebench.Usage{{CPUS: &half, PeakRSSMB: &half, PeakFDs: &one, Procs: &one}}},
		"bench scale summary": scalebench.Summary{}, "up": jobReport{Nodes: []jobNode{{}}, Delivery: &job.Delivery{ByModel: []job.ModelDelivery{{}}}}} {
		b, _ := json.Marshal(v)
		var row map[string]any
		json.Unmarshal(b, &row)
		bad := map[string]bool{}
		snakeKeys(row, name, bad)
		if len(bad) > 0 {
			t.Errorf("%s: keys not snake_case: %v", name, bad)
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("json") != nil {
			path := strings.TrimPrefix(c.CommandPath(), "vastfleet ")
			if c.Flags().Lookup("jq") == nil {
				t.Errorf("%q takes --json but not --jq: declare both with addJSONFlags", path)
			}
			if !covered[path] && !notRun[path] {
				t.Errorf("%q takes --json but this test never runs it: add it", path)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(factory.New(&iostreams.IOStreams{}, Version)))
}

// commandPath is the command part of args ("market depth" of
// ["market", "depth", "--json"]).
func commandPath(args []string) string {
	path := args[0]
	if (args[0] == "market" || args[0] == "bench" || args[0] == "sim" || args[0] == "serve" || args[0] == "context") && len(args) > 1 {
		path += " " + args[1]
	}
	if args[0] == "serve" && args[1] == "token" && len(args) > 2 {
		path += " " + args[2]
	}
	return path
}

// jsonValues decodes one JSON value, or JSON lines.
func jsonValues(t *testing.T, out string) []any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var vals []any
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		vals = append(vals, v)
	}
	return vals
}
