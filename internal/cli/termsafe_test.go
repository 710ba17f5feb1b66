package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTermSafe(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"RTX 4090", "RTX 4090"},
		{"Ünïcode 東京", "Ünïcode 東京"},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"\x1b[2J", `\x1b[2J`},
		{"a\tb\nc\rd", `a\tb\nc\rd`},
		{"del\x7f", `del\x7f`},
		{"c1\u009b31m", `c1\u009b31m`},
		{"bidi\u202eevil", `bidi\u202eevil`},
		{"bad\xffutf8", `bad\xffutf8`},
	} {
		if got := termSafe(c.in); got != c.want {
			t.Errorf("termSafe(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestOfferFieldsNeutralisedInTable: an offers file whose strings carry
// terminal escapes prints them as visible escapes in the table, and
// unchanged (JSON-escaped) with --json.
func TestOfferFieldsNeutralisedInTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	model, geo := "RTX 4090\x1b]0;pwned\x07", "US\x1b[2J"
	offer := map[string]any{"id": 7, "ask_contract_id": 7, "machine_id": 70, "gpu_name": model, "num_gpus": 1,
		"geolocation": geo, "cpu_cores_effective": 16, "cpu_ram": 65536, "dph_total": 0.4, "reliability2": 0.99,
		"rentable": true, "rented": false, "verified": true, "inet_down": 500, "inet_up": 500, "disk_space": 100}
	b, _ := json.Marshal([]any{offer})
	dump := filepath.Join(t.TempDir(), "offers.json")
	if err := os.WriteFile(dump, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.ok("search", "--from", dump, "-n")
	if strings.ContainsAny(r.out+r.err, "\x1b\x07") {
		t.Errorf("table output carries raw control characters:\n%q", r.out)
	}
	for _, want := range []string{`\x1b]0;pwned\x07`, `\x1b[2J`} {
		if !strings.Contains(r.out, want) {
			t.Errorf("table output lacks the visible escape %s:\n%s", want, r.out)
		}
	}
	j := decode[[]map[string]any](t, e.ok("search", "--from", dump, "-n", "--json").out)
	if len(j) != 1 || j[0]["gpu_name"] != model || j[0]["geolocation"] != geo {
		t.Errorf("--json changed the strings: %v", j)
	}
}

// A node's output reaches the terminal with its escape sequences made
// visible through exec (logs prints through the same termsafe.Text), while tabs, newlines and UTF-8 stay as
// they are.
func TestSafeNodeOutputInExec(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.launchFleet("q", 1)
	cmd := `printf 'col1\tcol2 東京\n\033]0;pwned\007\033]52;c;cGF5bG9hZA==\007\033[2Jafter\n'`
	for _, args := range [][]string{{"exec", "--fleet", "q", "--", cmd}} {
		out := e.ok(args...).out
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("%s prints raw escapes: %q", args[0], out)
		}
		for _, want := range []string{"col1\tcol2 東京\n", `\x1b]0;pwned\x07\x1b]52;c;cGF5bG9hZA==\x07\x1b[2Jafter`} {
			if !strings.Contains(out, want) {
				t.Errorf("%s output %q lacks %q", args[0], out, want)
			}
		}
	}
}
