package cli

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// --jq runs a jq expression over a command's JSON, as gh's does: strings
// print raw, other values as compact JSON, one result per line.
func TestJqFiltersAndPrintsRaw(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if got := e.ok("version", "--jq", ".go_version").out; got != runtime.Version()+"\n" {
		t.Fatalf("version --jq .go_version = %q, want the raw string %q", got, runtime.Version()+"\n")
	}
	offers := decode[[]map[string]any](t, e.ok("search", "--limit", "3", "--json").out)
	ids := e.ok("search", "--limit", "3", "--jq", ".[] | .id").out
	lines := strings.Split(strings.TrimSuffix(ids, "\n"), "\n")
	if len(lines) != len(offers) || len(offers) != 3 {
		t.Fatalf("search --jq '.[] | .id' printed %q for %d offers", ids, len(offers))
	}
	for i, o := range offers {
		// The id as written (a JSON number, not 1.234e+07).
		if want := strconv.FormatInt(int64(o["id"].(float64)), 10); lines[i] != want {
			t.Errorf("line %d = %q, want %q", i, lines[i], want)
		}
	}
	// status went through --json's writer alone and printed the whole
	// array: found by the testscript scenarios.
	if got := e.ok("status", "--jq", "length").out; got != "0\n" {
		t.Fatalf("status --jq length = %q, want 0", got)
	}
	if got := e.ok("search", "--limit", "3", "--jq", "{n: length, first: .[0].id}").out; !strings.HasPrefix(got, `{"first":`) || !strings.HasSuffix(got, `,"n":3}`+"\n") {
		t.Fatalf("an object result = %q, want one compact JSON line", got)
	}
}

func TestJqStreamsLaunchEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("launch", "--count", "2", "--deadline", "30m", "--fleet", "j", "--image", "ubuntu:22.04",
		"-n", "rentable=True num_gpus=1 dph_total<1", "--jq", "select(.event == \"summary\") | .event")
	if r.code != 0 && r.code != 3 {
		t.Fatalf("launch --jq: exit %d\n%s", r.code, r.err)
	}
	// One JSON event per line goes through the query one by one.
	if r.out != "summary\n" {
		t.Fatalf("launch --jq printed %q, want the summary's type alone", r.out)
	}
}

func TestJqBadExpressionIsAUsageError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("ls", "--jq", ".[")
	if r.code != 2 || !strings.Contains(r.err, "--jq") || r.out != "" {
		t.Fatalf("ls --jq '.[': exit %d, stdout %q, stderr %q; want exit 2 naming --jq", r.code, r.out, r.err)
	}
	// A query that fails on the data is a plain error.
	r = e.run("version", "--jq", ".version | .x")
	if r.code != 1 || !strings.Contains(r.err, "--jq") {
		t.Fatalf("version --jq '.version | .x': exit %d, stderr %q; want exit 1 naming --jq", r.code, r.err)
	}
}
