package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/localmarket"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
)

// env is one user's machine: a data dir shared by every command run in it,
// so the in-process simulator keeps one market across commands.
type env struct {
	t    *testing.T
	home string
	// speed is the simulator's time scale. Commands whose pace is set by
	// wall-time work (many API calls) need a slower clock than single rents.
	speed string
	// vars are more environment variables (VASTFLEET_TOKEN).
	vars map[string]string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, home: t.TempDir(), speed: "3000"}
	// The local market outlives the commands: it saves and ends before
	// the data dir is removed, not while it is.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := localmarket.Stop(ctx, filepath.Join(e.home, "sim")); err != nil {
			t.Logf("stopping the local market: %v", err)
		}
	})
	return e
}

type result struct {
	out, err string
	code     int
}

// run runs one vastfleet command as a separate invocation would: its own
// factory, its own in-process simulator opened from the data dir.
func (e *env) run(args ...string) result {
	e.t.Helper()
	return e.runIn("", args...)
}

// runIn is run with stdin.
func (e *env) runIn(stdin string, args ...string) result {
	e.t.Helper()
	var out, errb bytes.Buffer
	ios := &iostreams.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errb, Getenv: func(k string) string {
		if k == "VASTFLEET_HOME" {
			return e.home
		}
		if k == "VASTFLEET_CONFIG" {
			return filepath.Join(e.home, "config")
		}
		if v, ok := e.vars[k]; ok {
			return v
		}
		return ""
	}}
	// A fast clock keeps boots to a tenth of a second of wall time, with a
	// 30-minute wait timeout still half a second away; no faults
	// unless a test asks, so outcomes do not depend on the draw.
	base := []string{"--sim-speed", e.speed, "--sim-faults", "none"}
	code := Main(context.Background(), ios, append(base, args...))
	return result{out: out.String(), err: errb.String(), code: code}
}

func (e *env) ok(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("vastfleet %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.out, r.err)
	}
	return r
}

func (e *env) fails(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code == 0 {
		e.t.Fatalf("vastfleet %s: succeeded, want an error\nstdout:\n%s", strings.Join(args, " "), r.out)
	}
	return r
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decoding JSON: %v\n%s", err, s)
	}
	return v
}

const mustShowQuery = `verified=any reliability=any external=any rented=any rentable=True inet_up>=200 inet_down>=200 cpu_cores_effective>16 geolocation!=HK geolocation!=CN dph_total>=0.000 dph_total<=5.000`

func TestQueryParseMatchesCLIObject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.ok("query", "parse", "-n", "--limit", "100", "-o", "+dph_total,+id", mustShowQuery)
	got := decode[map[string]any](t, r.out)
	want := decode[map[string]any](t, `{
		"rentable": {"eq": true},
		"inet_up": {"gte": "200"},
		"inet_down": {"gte": "200"},
		"cpu_cores_effective": {"gt": "16"},
		"geolocation": {"notin": ["HK", "CN"]},
		"dph_total": {"gte": "0.000", "lte": "5.000"},
		"order": [["dph_total", "asc"], ["id", "asc"]],
		"type": "on-demand",
		"limit": 100,
		"allocated_storage": 5.0
	}`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("query object (-want +got):\n%s", diff)
	}
	if !strings.Contains(r.err, "notin") {
		t.Errorf("stderr should note the repeated != merged into notin, got %q", r.err)
	}
}

func TestSearchRanksByVCPUWithoutExcludedCountries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	args := []string{"search", "-n", "--limit", "100", "-o", "+dph_total,+id", "--by", "vcpu", mustShowQuery}
	js := decode[[]map[string]any](t, e.ok(append(args, "--json")...).out)
	if len(js) == 0 || len(js) > 100 {
		t.Fatalf("got %d offers, want 1..100", len(js))
	}
	prev := 1e18
	for _, o := range js {
		geo := o["geolocation"].(string)
		if strings.HasSuffix(geo, "CN") || strings.HasSuffix(geo, "HK") {
			t.Errorf("offer %v in %s: CN/HK should be excluded", o["id"], geo)
		}
		score := o["score"].(float64)
		want := o["cpu_cores_effective"].(float64) / o["dph_total"].(float64)
		if diff := score - want; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("offer %v: score %v, want vCPU/$ %v", o["id"], score, want)
		}
		if score > prev {
			t.Errorf("offer %v: score %v after %v: not ranked", o["id"], score, prev)
		}
		prev = score
		for _, k := range []string{"id", "dph_total", "cpu_cores_effective", "cpu_ram", "gpu_name", "num_gpus", "reliability2"} {
			if _, ok := o[k]; !ok {
				t.Errorf("offer JSON lacks %q", k)
			}
		}
	}

	table := e.ok(args...).out
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if !strings.HasPrefix(lines[0], "ID\t") || !strings.Contains(lines[0], "RELIABILITY") {
		t.Errorf("header = %q", lines[0])
	}
	if !strings.HasPrefix(lines[len(lines)-1], "TOTAL") {
		t.Errorf("last line = %q, want the TOTAL row", lines[len(lines)-1])
	}
	for _, l := range lines[1 : len(lines)-1] {
		if l[0] < '0' || l[0] > '9' {
			t.Errorf("data line does not start with the offer id: %q", l)
		}
		if strings.HasSuffix(strings.Fields(l)[len(strings.Fields(l))-2], "CN") {
			t.Errorf("CN offer in table: %q", l)
		}
	}
	if len(lines)-2 != len(js) {
		t.Errorf("table has %d offers, JSON %d", len(lines)-2, len(js))
	}
}

func TestSearchExplainShowsQueryAndFactors(t *testing.T) {
	t.Parallel()
	out := newEnv(t).ok("search", "--by", "vcpu", "--limit", "3", "gpu_name=RTX_3090", "--explain").out
	if !strings.Contains(out, `query sent (POST /api/v0/bundles/): {`) || !strings.Contains(out, `"gpu_name":{"eq":"RTX 3090"}`) {
		t.Errorf("--explain should print the query object sent:\n%s", out)
	}
	if !strings.Contains(out, "cpu_cores_effective=") || !strings.Contains(out, "dph_total=") {
		t.Errorf("--explain should print each offer's score factors:\n%s", out)
	}
}

func TestSearchSweepAllAndSave(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	capped := decode[[]map[string]any](t, e.ok("search", "-n", "rentable=True", "--json").out)
	save := filepath.Join(e.home, "results.json")
	r := e.ok("search", "-n", "rentable=True", "--all", "--by", "gpu", "--json", "--save", save)
	all := decode[[]map[string]any](t, r.out)
	if len(all) <= len(capped) {
		t.Fatalf("--all found %d offers, a single capped search %d: the sweep should find more", len(all), len(capped))
	}
	if !strings.Contains(r.err, "requests") {
		t.Errorf("sweep should say how many requests it made; stderr %q", r.err)
	}
	seen := map[float64]bool{}
	for _, o := range all {
		id := o["id"].(float64)
		if seen[id] {
			t.Fatalf("offer %v twice in a sweep", id)
		}
		seen[id] = true
	}
	saved, err := os.ReadFile(save)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all, decode[[]map[string]any](t, string(saved))); diff != "" {
		t.Errorf("--save differs from --json output (-json +saved):\n%s", diff)
	}
}

func TestSearchBadQueryNamesTheTerm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.fails("search", "num_gpus=>2")
	if r.code != 2 || !strings.Contains(r.err, "=>") {
		t.Errorf("exit %d, stderr %q: want exit 2 naming the operator", r.code, r.err)
	}
	r = e.run("search", "gpu_rma>=24", "--json")
	if !strings.Contains(r.err, "did you mean gpu_ram") {
		t.Errorf("stderr %q: want a did-you-mean for gpu_rma", r.err)
	}
	if r := e.fails("search", "--by", "price"); !strings.Contains(r.err, "vcpu") {
		t.Errorf("--by price: stderr %q should list the valid kinds", r.err)
	}
	if r := e.fails("search", "--score", "cpu_cores_effective /"); r.code != 2 {
		t.Errorf("bad --score: exit %d, want 2", r.code)
	}
}

func TestMarketDepthTableAndPlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	plot := filepath.Join(e.home, "depth.svg")
	r := e.ok("market", "depth", "-n", "rentable=True inet_up>=200 inet_down>=200 cpu_cores_effective>16 geolocation notin [CN,HK] dph_total<=5", "--plot", plot, "--json")
	rows := decode[[]map[string]float64](t, r.out)
	if len(rows) != 6 {
		t.Fatalf("got %d rows, want 6 (10/30/50/100/200/300)", len(rows))
	}
	for i := 1; i < len(rows); i++ {
		if rows[i]["VCPU"] < rows[i-1]["VCPU"] && rows[i]["vcpu"] < rows[i-1]["vcpu"] {
			t.Errorf("depth not cumulative at row %d: %v", i, rows)
		}
	}
	svg, err := os.ReadFile(plot)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("<polyline")) {
		t.Errorf("plot is not an SVG with a curve: %.200s", svg)
	}
	// Well-formed XML, or viewers refuse it; and it marks the table's rows.
	// encoding/xml accepts a repeated attribute, which XML (and so every
	// SVG viewer) refuses, so check for that by hand.
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("plot is not well-formed XML: %v", err)
		}
		if el, ok := tok.(xml.StartElement); ok {
			seen := map[string]bool{}
			for _, a := range el.Attr {
				if seen[a.Name.Local] {
					t.Fatalf("plot: <%s> repeats attribute %s", el.Name.Local, a.Name.Local)
				}
				seen[a.Name.Local] = true
			}
		}
	}
	for _, n := range []string{"top 10<", "top 100<", "top 300<"} {
		if !bytes.Contains(svg, []byte(n)) {
			t.Errorf("plot does not mark %q", strings.TrimSuffix(n, "<"))
		}
	}
	png := filepath.Join(e.home, "depth.png")
	e.ok("market", "depth", "-n", "rentable=True", "--plot", png)
	b, err := os.ReadFile(png)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("PNG plot missing or not a PNG (%v)", err)
	}
	// --score replaces the default --by vcpu without a conflict; the same
	// expression ranks the same way.
	byExpr := decode[[]map[string]float64](t, e.ok("market", "depth", "-n", "rentable=True", "--score", "cpu_cores_effective / dph_total", "--json").out)
	byVCPU := decode[[]map[string]float64](t, e.ok("market", "depth", "-n", "rentable=True", "--json").out)
	if diff := cmp.Diff(byVCPU, byExpr); diff != "" {
		t.Errorf("--score 'cpu_cores_effective / dph_total' differs from --by vcpu (-by +score):\n%s", diff)
	}
	if r := e.fails("market", "depth", "--plot", "depth.gif"); r.code != 2 {
		t.Errorf("--plot depth.gif: exit %d, want 2", r.code)
	}
}

// TestReadmeQuickStart holds the README's promise: its quick start is two
// commands, the demo and the tests, and the demo runs (as the built binary:
// its agents and CPU job run that binary). The search line that follows it
// runs too, in-process.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "## Quick start")
	if start < 0 {
		t.Fatal("README has no Quick start section")
	}
	block := text[start:]
	block = block[strings.Index(block, "```sh\n")+len("```sh\n"):]
	block = block[:strings.Index(block, "```")]
	var commands []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			commands = append(commands, l)
		}
	}
	if want := []string{"go run ./cmd/vastfleet demo", "go test -short ./..."}; !cmp.Equal(commands, want) {
		t.Fatalf("README's quick start should be exactly %q, it has %q", want, commands)
	}
	checkDemo(t, []string{"demo"})
	var searched bool
	for _, l := range strings.Split(text, "\n") {
		line, ok := strings.CutPrefix(l, "go run ./cmd/vastfleet search ")
		if !ok {
			continue
		}
		args, err := shellWords("search " + line)
		if err != nil {
			t.Fatalf("README search %q: %v", line, err)
		}
		out := newEnv(t).ok(args...).out
		rows := strings.Split(strings.TrimSpace(out), "\n")
		if len(rows) < 3 || !strings.HasPrefix(rows[0], "ID\t") || !strings.HasPrefix(rows[len(rows)-1], "TOTAL") {
			t.Errorf("README search printed no offer table:\n%s", out)
		}
		searched = true
	}
	if !searched {
		t.Error("README shows no search command")
	}
}

// checkDemo runs `vastfleet demo` as built: findings made, a cost report
// printed, every instance destroyed, exit 0.
func checkDemo(t *testing.T, args []string) {
	t.Helper()
	needAgentTools(t)
	bin := vastfleetBinary(t)
	data := t.TempDir()
	// The README's command with 8 nodes instead of 20: the same story,
	// inside the package's test timeout on a busy 2-core machine.
	cmd := exec.Command(bin, append(append([]string{"--data-dir", data}, args...), "--count", "8", "--seconds", "3")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// The realistic market loses a node now and then after the
		// release: the job then ends short, says so and exits 3 (partial),
		// rather than bill the others until max_duration and exit 0.
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(stderr.String(), "nodes lost: run exited on") {
			t.Fatalf("vastfleet %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		t.Logf("the demo's job ended short, exit 3: %s", tail(stderr.String(), 1))
	}
	out := stdout.String()
	var findings int
	if _, err := fmt.Sscanf(out[strings.Index(out, "  findings ")+len("  findings "):], "%d", &findings); err != nil || findings == 0 {
		t.Errorf("demo made no findings:\n%s", out)
	}
	if !strings.Contains(out, "cost report for job demo-") || !strings.Contains(out, "instances still live 0") {
		t.Errorf("demo printed no cost report, or left instances:\n%s", out)
	}
	ls := exec.Command(bin, "--data-dir", data, "--sim-faults", "none", "ls", "--json")
	lsOut, err := ls.Output()
	if err != nil || strings.Contains(string(lsOut), `"id"`) {
		t.Errorf("after the demo, ls shows instances (%v):\n%s", err, lsOut)
	}
	// Built as `go run` builds it, nothing beside it: the coordinator must
	// still ship the small agent, built from this checkout (issue 28).
	if strings.Contains(stderr.String(), "serving this vastfleet binary as the agent") || !strings.Contains(stderr.String(), "building the small agent") {
		t.Errorf("the demo did not ship the small agent:\n%s", tail(stderr.String(), 30))
	}
	t.Logf("demo stderr tail:\n%s", tail(stderr.String(), 12))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// shellWords splits a command line as a POSIX shell would for the simple
// quoting the README uses: spaces, and single-quoted words.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unbalanced quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// Every command on the real API goes through one paced client.
func TestRealAPIIsPaced(t *testing.T) {
	t.Parallel()
	f := factory.New(&iostreams.IOStreams{ErrOut: io.Discard, Getenv: func(string) string { return "" }}, Version)
	f.Opts = factory.Options{Market: "vast", APIKey: "k", APIURL: "http://127.0.0.1:1", APIRate: 3, SimSpeed: 60}
	p, err := f.Provider(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, ok := p.(*vast.Client)
	if !ok || c.Rate() != 3 {
		t.Fatalf("provider %T paced at %v, want the vast client at --api-rate 3", p, c.Rate())
	}
	e := newEnv(t)
	r := e.fails("--api-rate", "NaN", "balance")
	if !strings.Contains(r.err, "--api-rate") {
		t.Fatalf("want --api-rate NaN refused by name, got %s", r.err)
	}
}

func TestVersionComesFromBuildInfo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := decode[map[string]any](t, e.ok("version", "--json").out)
	if b["version"] == "" || b["version"] == "dev" || b["go_version"] == "" {
		t.Fatalf("version --json = %v, want the module version and Go version from the build info", b)
	}
	text := e.ok("version").out
	if flag := e.ok("--version").out; flag != text || !strings.HasPrefix(text, "vastfleet ") {
		t.Fatalf("version prints %q, --version prints %q", text, flag)
	}
}

// Documented exit codes: 2 usage, 3 partial, 4 auth.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("rent"); r.code != 2 {
		t.Errorf("rent without an offer: exit %d, want 2 (usage)", r.code)
	}
	if r := e.run("--api-key", "not-the-key", "balance"); r.code != 4 {
		t.Errorf("a refused key: exit %d, want 4 (auth)\n%s", r.code, r.err)
	}
	r := e.run("launch", "--count", "2", "--deadline", "1m", "--fleet", "short", "--image", "ubuntu:22.04", "--json", "-n", "rentable=True num_gpus=1 dph_total<1")
	if r.code != 3 || !strings.Contains(r.err, "below the 2 required") {
		t.Errorf("a launch that ends short of --min-ready: exit %d, want 3 (partial)\n%s", r.code, r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	sum := decode[map[string]any](t, lines[len(lines)-1])
	if sum["event"] != "summary" || sum["fleet"] != "short" || sum["min_ready"] != 2.0 || sum["ready"].(float64) >= 2 ||
		len(sum["ready_ids"].([]any)) != int(sum["ready"].(float64)) {
		t.Errorf("the partial launch's summary: %v", sum)
	}
	// The codes are documented where users look.
	help := e.ok("launch", "--help").out
	for _, want := range []string{"Exit codes", "3 the launch ended with fewer", "130 interrupted", "ready_ids"} {
		if !strings.Contains(help, want) {
			t.Errorf("launch --help lacks %q", want)
		}
	}
}

// Search mistakes are caught before anything is sent, with the fix.
func TestSearchInputHelp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.fails("search", "gpu_nam=RTX_4090"); r.code != 2 || !strings.Contains(r.err, "did you mean gpu_name") || strings.Contains(r.err, "HTTP") {
		t.Errorf("unknown field: exit %d %q, want a usage error naming gpu_name, before any request", r.code, r.err)
	}
	if r := e.fails("search", "gpu_name=RTX 4090"); !strings.Contains(r.err, "gpu_name=RTX_4090") {
		t.Errorf("a value with a space: %q, want the RTX_4090 spelling suggested", r.err)
	}
	// The same offers in the same order at the same prices: min_bid, a
	// column the market moves every half hour of its time, may differ
	// between two commands.
	type listed struct {
		ID       int64   `json:"id"`
		DPHTotal float64 `json:"dph_total"`
	}
	a := decode[[]listed](t, e.ok("search", "offers", "gpu_ram>=24", "-o", "+dph_total", "--limit", "3", "--json").out)
	b := decode[[]listed](t, e.ok("search", "gpu_ram>=24", "-o", "+dph_total", "--limit", "3", "--json").out)
	if len(a) != 3 || !slices.Equal(a, b) {
		t.Errorf("`search offers QUERY` gave %v, `search QUERY` %v", a, b)
	}
	if r := e.ok("search", "--limit", "2"); !strings.Contains(r.err, "--all") {
		t.Errorf("a one-page search does not say how to rank every offer: %q", r.err)
	}
	if r := e.ok("query", "parse", "foo=1"); !strings.Contains(r.out, `"foo"`) {
		t.Errorf("query parse must still show what the vastai CLI sends for an unknown field: %q", r.out)
	}
}

// --limit N keeps the N best offers by the ranking whether one page or the
// whole market was searched, as with --from; it never ranks only the first
// N in the marketplace's order.
func TestSearchLimitMeansTheSameWithAndWithoutAll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := func(args ...string) []float64 {
		t.Helper()
		var out []float64
		for _, o := range decode[[]map[string]any](t, e.ok(append(args, "--json")...).out) {
			out = append(out, o["id"].(float64))
		}
		return out
	}
	const q = "gpu_ram>=24"
	page := ids("search", "--by", "vcpu", "--limit", "1000", q)
	all := ids("search", "--by", "vcpu", "--all", q)
	if len(page) < 10 || len(all) < len(page) {
		t.Fatalf("the simulated market matched %d offers in one page, %d in all; want enough to rank", len(page), len(all))
	}
	if got := ids("search", "--by", "vcpu", "--limit", "3", q); !slices.Equal(got, page[:3]) {
		t.Errorf("search --limit 3 = %v, want the 3 best of the page %v", got, page[:3])
	}
	if got := ids("search", "--by", "vcpu", "--limit", "3", "--all", q); !slices.Equal(got, all[:3]) {
		t.Errorf("search --all --limit 3 = %v, want the 3 best of every offer %v", got, all[:3])
	}
	if len(all) < 1000 && !slices.Equal(page[:3], all[:3]) {
		t.Errorf("the page held every offer, yet the 3 best differ: %v and %v", page[:3], all[:3])
	}
	// Without a score the marketplace's order is the ranking.
	byPrice := ids("search", "-o", "+dph_total,+id", "--limit", "1000", q)
	if got := ids("search", "-o", "+dph_total,+id", "--limit", "3", q); !slices.Equal(got, byPrice[:3]) {
		t.Errorf("search -o +dph_total --limit 3 = %v, want %v", got, byPrice[:3])
	}
}

// Off a terminal a table is tab-separated lines, header first, so `cut -f`
// and awk read it; on a terminal it is aligned (TestLaunchOnATerminal...).
func TestTablesArePlainOffATerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.ok("search", "--by", "vcpu", "--limit", "5", "cpu_cores_effective>16")
	lines := strings.Split(strings.TrimRight(r.out, "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("want a header and rows, got %q", r.out)
	}
	header := strings.Split(lines[0], "\t")
	if header[0] != "ID" || len(header) < 5 {
		t.Fatalf("header %q: want tab-separated columns starting with ID", lines[0])
	}
	for _, l := range lines {
		if strings.Contains(l, "  ") {
			t.Errorf("line %q is padded for alignment off a terminal", l)
		}
		if n := len(strings.Split(l, "\t")); n != len(header) {
			t.Errorf("line %q has %d fields, the header %d", l, n, len(header))
		}
	}
}
