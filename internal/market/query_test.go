package market

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bodyOf marshals q and decodes it generically, so numbers compare as numbers.
func bodyOf(t *testing.T, q Query) map[string]any {
	t.Helper()
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return m
}

func wantBody(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad want %s: %v", s, err)
	}
	return m
}

const mustShowQuery = `verified=any reliability=any external=any rented=any rentable=True inet_up>=200 inet_down>=200 cpu_cores_effective>16 geolocation!=HK geolocation!=CN dph_total>=0.000 dph_total<=5.000`

func TestParseMustShowGolden(t *testing.T) {
	q, warns, err := Parse(mustShowQuery, ParseOptions{NoDefault: true, Limit: 100, Order: "+dph_total,+id"})
	if err != nil {
		t.Fatal(err)
	}
	want := wantBody(t, `{"rentable":{"eq":true},"inet_up":{"gte":"200"},"inet_down":{"gte":"200"},
		"cpu_cores_effective":{"gt":"16"},"geolocation":{"notin":["HK","CN"]},
		"dph_total":{"gte":"0.000","lte":"5.000"},"order":[["dph_total","asc"],["id","asc"]],
		"type":"on-demand","limit":100,"allocated_storage":5.0}`)
	if d := cmp.Diff(want, bodyOf(t, q)); d != "" {
		t.Errorf("body mismatch (-want +got):\n%s", d)
	}
	if len(warns) != 1 || !strings.Contains(string(warns[0]), "notin") {
		t.Errorf("want one notin merge warning, got %q", warns)
	}
}

func TestParseCLIExample(t *testing.T) {
	q, warns, err := Parse("gpu_ram>=24 num_gpus=2 geolocation!=CN", ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := wantBody(t, `{"allocated_storage": 5.0, "external": {"eq": false}, "geolocation": {"neq": "CN"},
 "gpu_ram": {"gte": 24000.0}, "num_gpus": {"eq": "2"}, "order": [["score", "desc"]],
 "rentable": {"eq": true}, "type": "on-demand", "verified": {"eq": true}}`)
	if d := cmp.Diff(want, bodyOf(t, q)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if len(warns) != 0 {
		t.Errorf("unexpected warnings %q", warns)
	}
}

func TestParseOrder(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want [][2]string
	}{
		{"num_gpus-,total_flops+", [][2]string{{"num_gpus", "desc"}, {"total_flops", "asc"}}},
		{"dph-", [][2]string{{"dph_total", "desc"}}},
		{" dlperf_usd- , ,cuda_vers", [][2]string{{"dlperf_per_dphtotal", "desc"}, {"cuda_max_good", "asc"}}},
		{"score-", [][2]string{{"score", "desc"}}},
		{"-dph_total", [][2]string{{"dph_total", "desc"}}},
		{"--x--", [][2]string{{"x", "desc"}}},
		{"+id", [][2]string{{"id", "asc"}}},
		{"", [][2]string{}},
		{" , ", [][2]string{}},
	} {
		if d := cmp.Diff(tc.want, ParseOrder(tc.in)); d != "" {
			t.Errorf("ParseOrder(%q) (-want +got):\n%s", tc.in, d)
		}
	}
	q, _, err := Parse("", ParseOptions{Order: "dph-"})
	if err != nil || !cmp.Equal(q.Order, [][2]string{{"dph_total", "desc"}}) {
		t.Errorf("order via ParseOptions: %v %v", q.Order, err)
	}
}

func TestParseRules(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		opts        ParseOptions
		want        string // filters only (request keys removed), as JSON
	}{
		{"defaults", "", ParseOptions{}, `{"verified":{"eq":true},"external":{"eq":false},"rentable":{"eq":true}}`},
		{"no default", "", ParseOptions{NoDefault: true}, `{}`},
		{"trim comma", "num_gpus=2,", ParseOptions{NoDefault: true}, `{"num_gpus":{"eq":"2"}}`},
		{"trim brackets list", "geolocation in [US,CA]", ParseOptions{NoDefault: true}, `{"geolocation":{"in":["US","CA"]}}`},
		{"list no brackets", "num_gpus in 1,2", ParseOptions{NoDefault: true}, `{"num_gpus":{"in":["1","2"]}}`},
		{"list open bracket", "num_gpus in [1,2", ParseOptions{NoDefault: true}, `{"num_gpus":{"in":["1","2"]}}`},
		{"list spaces and empties", "geolocation notin [US, ,CA ]", ParseOptions{NoDefault: true}, `{"geolocation":{"notin":["US","CA"]}}`},
		{"not in", "geolocation not in [US]", ParseOptions{NoDefault: true}, `{"geolocation":{"notin":["US"]}}`},
		{"nin", "geolocation nin US", ParseOptions{NoDefault: true}, `{"geolocation":{"notin":["US"]}}`},
		{"not eq", "num_gpus not eq 2", ParseOptions{NoDefault: true}, `{"num_gpus":{"neq":"2"}}`},
		{"noteq", "num_gpus noteq 2", ParseOptions{NoDefault: true}, `{"num_gpus":{"neq":"2"}}`},
		{"word ops", "num_gpus gte 2 dph lt 1 reliability gt 0.9 cpu_cores lte 64 id eq 5", ParseOptions{NoDefault: true},
			`{"num_gpus":{"gte":"2"},"dph_total":{"lt":"1"},"reliability":{"gt":"0.9"},"cpu_cores":{"lte":"64"},"id":{"eq":"5"}}`},
		{"double equals", "num_gpus==2", ParseOptions{NoDefault: true}, `{"num_gpus":{"eq":"2"}}`},
		{"spaced op", "num_gpus = 2", ParseOptions{NoDefault: true}, `{"num_gpus":{"eq":"2"}}`},
		{"aliases", "cuda_vers>=12.1 dph<1 dlperf_usd>2 flops_usd>3 display_active=false", ParseOptions{NoDefault: true},
			`{"cuda_max_good":{"gte":"12.1"},"dph_total":{"lt":"1"},"dlperf_per_dphtotal":{"gt":"2"},"flops_per_dphtotal":{"gt":"3"},"gpu_display_active":{"eq":false}}`},
		{"alias merges", "dph>0.1 dph_total<1", ParseOptions{NoDefault: true}, `{"dph_total":{"gt":"0.1","lt":"1"}}`},
		{"driver version", "driver_version>=535.86.05", ParseOptions{NoDefault: true}, `{"driver_version":{"gte":535086005}}`},
		{"driver version wide", "driver_version>=1234.5.6", ParseOptions{NoDefault: true}, `{"driver_version":{"gte":1234005006}}`},
		{"driver version no dot", "driver_version>=535", ParseOptions{NoDefault: true}, `{"driver_version":{"gte":"535"}}`},
		{"driver version list", "driver_version in [535.86.05,550.1.2]", ParseOptions{NoDefault: true}, `{"driver_version":{"in":[535086005,550001002]}}`},
		{"wildcard deletes default", "verified=any", ParseOptions{}, `{"external":{"eq":false},"rentable":{"eq":true}}`},
		{"wildcard star and ?", "external=* rentable=?", ParseOptions{}, `{"verified":{"eq":true}}`},
		{"wildcard then re-add", "verified=any verified=True", ParseOptions{}, `{"verified":{"eq":true},"external":{"eq":false},"rentable":{"eq":true}}`},
		{"wildcard deletes all ops", "num_gpus>1 num_gpus<4 num_gpus=any", ParseOptions{NoDefault: true}, `{}`},
		{"quoted any is a string", `gpu_name="any"`, ParseOptions{NoDefault: true}, `{"gpu_name":{"eq":"any"}}`},
		{"gpu_ram any before conversion", "gpu_ram=any", ParseOptions{NoDefault: true}, `{}`},
		{"underscore", "gpu_name=RTX_4090 cpu_arch=x86_64", ParseOptions{NoDefault: true}, `{"gpu_name":{"eq":"RTX 4090"},"cpu_arch":{"eq":"x86 64"}}`},
		{"quoted spaces", `gpu_name="RTX 4090"`, ParseOptions{NoDefault: true}, `{"gpu_name":{"eq":"RTX 4090"}}`},
		{"single quotes kept", `geolocation notin ['XV','XZ']`, ParseOptions{NoDefault: true}, `{"geolocation":{"notin":["'XV'","'XZ'"]}}`},
		{"list underscores", `gpu_name in [RTX_4090,"A100_SXM4"]`, ParseOptions{NoDefault: true}, `{"gpu_name":{"in":["RTX 4090","A100 SXM4"]}}`},
		{"multipliers", "cpu_ram>=64 gpu_ram>=24 gpu_total_ram<=80 duration>=2", ParseOptions{NoDefault: true},
			`{"cpu_ram":{"gte":64000},"gpu_ram":{"gte":24000},"gpu_total_ram":{"lte":80000},"duration":{"gte":172800}}`},
		{"multiplier true stays number", "gpu_ram=1", ParseOptions{NoDefault: true}, `{"gpu_ram":{"eq":1000}}`},
		{"multiplier list", "gpu_ram in [16,24]", ParseOptions{NoDefault: true}, `{"gpu_ram":{"in":[16000,24000]}}`},
		{"bools and null", "rentable=true static_ip=False external=None vms_enabled=null", ParseOptions{NoDefault: true},
			`{"rentable":{"eq":true},"static_ip":{"eq":false},"external":{"eq":null},"vms_enabled":{"eq":null}}`},
		{"TRUE stays string", "rentable=TRUE", ParseOptions{NoDefault: true}, `{"rentable":{"eq":"TRUE"}}`},
		{"numbers stay strings", "num_gpus=1 reliability>0.95 dph<1e-1 has_avx=1", ParseOptions{NoDefault: true},
			`{"num_gpus":{"eq":"1"},"reliability":{"gt":"0.95"},"dph_total":{"lt":"1e-1"},"has_avx":{"eq":"1"}}`},
		{"list items not converted", "rentable in [true,False]", ParseOptions{NoDefault: true}, `{"rentable":{"in":["true","False"]}}`},
		{"overwrite same op", "num_gpus=1 num_gpus=2", ParseOptions{NoDefault: true}, `{"num_gpus":{"eq":"2"}}`},
		{"default plus op", "verified!=x", ParseOptions{}, `{"verified":{"eq":true,"neq":"x"},"external":{"eq":false},"rentable":{"eq":true}}`},
		{"default replaced", "external=true", ParseOptions{}, `{"verified":{"eq":true},"external":{"eq":true},"rentable":{"eq":true}}`},
		{"repeated neq merges", "geolocation!=HK geolocation!=CN geolocation!=DE", ParseOptions{NoDefault: true}, `{"geolocation":{"notin":["HK","CN","DE"]}}`},
		{"repeated same neq", "geolocation!=HK geolocation!=HK", ParseOptions{NoDefault: true}, `{"geolocation":{"neq":"HK"}}`},
		{"neq merge multiplier", "gpu_ram!=16 gpu_ram!=24", ParseOptions{NoDefault: true}, `{"gpu_ram":{"notin":[16000,24000]}}`},
		{"tab is part of value", "gpu_name=a\tb", ParseOptions{NoDefault: true}, `{"gpu_name":{"eq":"a\tb"}}`},
		{"unknown field sent", "foo=1", ParseOptions{NoDefault: true}, `{"foo":{"eq":"1"}}`},
		{"limit clause survives", "limit=5", ParseOptions{NoDefault: true}, `{"limit":{"eq":"5"}}`},
		{"type and order clauses lost", "type=x order=y allocated_storage=3", ParseOptions{NoDefault: true}, `{}`},
		{"trimmed query", "  num_gpus=2  ", ParseOptions{NoDefault: true}, `{"num_gpus":{"eq":"2"}}`},
		{"argv joined spacing", "num_gpus=2    dph<1", ParseOptions{NoDefault: true}, `{"num_gpus":{"eq":"2"},"dph_total":{"lt":"1"}}`},
		{"digit field", "3d=1", ParseOptions{NoDefault: true}, `{"3d":{"eq":"1"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, _, err := Parse(tc.query, tc.opts)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.query, err)
			}
			got := bodyOf(t, q)
			for _, k := range []string{"order", "type", "allocated_storage"} {
				delete(got, k)
			}
			if q.Limit != 0 {
				delete(got, "limit")
			}
			if d := cmp.Diff(wantBody(t, tc.want), got); d != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tc.query, d)
			}
		})
	}
}

func TestParseRequestKeys(t *testing.T) {
	for _, tc := range []struct {
		opts ParseOptions
		want string
	}{
		{ParseOptions{NoDefault: true}, `{"order":[["score","desc"]],"type":"on-demand","allocated_storage":5}`},
		{ParseOptions{NoDefault: true, Type: "interruptible"}, `{"order":[["score","desc"]],"type":"bid","allocated_storage":5}`},
		{ParseOptions{NoDefault: true, Type: "reserved", Limit: 3, Storage: 16}, `{"order":[["score","desc"]],"type":"reserved","limit":3,"allocated_storage":16}`},
		{ParseOptions{NoDefault: true, Type: "whatever"}, `{"order":[["score","desc"]],"type":"whatever","allocated_storage":5}`},
	} {
		q, _, err := Parse("", tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(wantBody(t, tc.want), bodyOf(t, q)); d != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.opts, d)
		}
	}
	// With --limit, a limit clause is overwritten by the request key.
	q, _, _ := Parse("limit=5", ParseOptions{NoDefault: true, Limit: 7})
	if got := bodyOf(t, q)["limit"]; got != 7.0 {
		t.Errorf("limit = %v, want 7", got)
	}
}

func TestParseWarnings(t *testing.T) {
	for _, tc := range []struct {
		query, want string
	}{
		{"gpu_rma>=24", `unknown field "gpu_rma" — did you mean gpu_ram?`},
		{"num_gpu=2", `did you mean num_gpus?`},
		{"reliabilty>0.9", `did you mean reliability?`},
		{"cpu_name=x", `unknown field "cpu_name": not in the CLI's recognised set, sent unchanged`},
		{"zzzzzz=1", `unknown field "zzzzzz": not in the CLI's recognised set`},
		{"geolocation!=HK geolocation!=CN", `repeated geolocation!= merged into geolocation notin ["HK","CN"]`},
	} {
		_, warns, err := Parse(tc.query, ParseOptions{NoDefault: true})
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		if len(warns) != 1 || !strings.Contains(string(warns[0]), tc.want) {
			t.Errorf("Parse(%q) warnings = %q, want one containing %q", tc.query, warns, tc.want)
		}
	}
	if _, warns, _ := Parse("cuda_vers>=12 num_gpus=1", ParseOptions{}); len(warns) != 0 {
		t.Errorf("known fields and aliases warn: %q", warns)
	}
}

// In strict mode (search), a list left open is an error; the vastai CLI,
// and query parse, read it as if closed.
func TestStrictRefusesOpenLists(t *testing.T) {
	for _, q := range []string{"geolocation in [US,", "num_gpus in [1,2 gpu_ram>=24"} {
		if _, _, err := Parse(q, ParseOptions{NoDefault: true, Strict: true}); err == nil || !strings.Contains(err.Error(), "is not closed") {
			t.Errorf("strict Parse(%q) = %v, want an open-list error", q, err)
		}
		if _, _, err := Parse(q, ParseOptions{NoDefault: true}); err != nil {
			t.Errorf("Parse(%q) as the CLI does = %v, want it accepted", q, err)
		}
	}
	_, _, err := Parse("geolocation in [US,", ParseOptions{Strict: true})
	if err == nil || !strings.Contains(err.Error(), "write [US]") {
		t.Errorf("the error should show the closed list: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		query, want string
	}{
		{"gpu_ram>=24 num_gpus=2 num_gpus=>2", `term 3 "num_gpus=>2" at column 24: unknown operator "=>"; use one of = != > >= < <= in notin`},
		{"num_gpus<>2", `term 1 "num_gpus<>2" at column 1: unknown operator "<>"`},
		{"gpu_name RTX_3090", `term 1 "gpu_name RTX_3090" at column 1: missing operator after "gpu_name"; use one of`},
		{"num_gpus", `term 1 "num_gpus" at column 1: missing operator`},
		{"num_gpus in[1,2]", `term 1 "num_gpus in[1,2]" at column 1: missing operator`},
		{"dph_total<0.5 & num_gpus=1", `text "& " at column 15: unexpected text between clauses; did you forget to quote your query?`},
		{"num_gpus=", `term 1 "num_gpus=" at column 1: value cannot be blank`},
		{"gpu_name in []", `term 1 "gpu_name in []" at column 1: value cannot be blank`},
		{"gpu_name in [,]", `value cannot be blank`},
		{"num_gpus>any", `wildcard "any" only makes sense with =`},
		{"num_gpus in any", `term 1`}, // a list: "any" is an ordinary item, so no error
		{"gpu_ram>=24GB", `term 1 "gpu_ram>=24GB" at column 1: could not convert "24GB" to a number`},
		{"gpu_ram in [16,x]", `could not convert "x" to a number`},
		{"gpu_ram>=nan", `could not convert "nan"`},
		{"gpu_ram>=1e999", `could not convert "1e999"`},
		{"driver_version>=535.86", `invalid driver version "535.86"; expected X.Y.Z`},
		{"driver_version in [535.1,1.2.3]", `bad driver version "535.1" in list`},
		{"é=1", `text "é=" at column 1`},
	} {
		_, _, err := Parse(tc.query, ParseOptions{NoDefault: true})
		if tc.query == "num_gpus in any" {
			if err != nil {
				t.Errorf("%q: %v", tc.query, err)
			}
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) err = %v, want *ParseError", tc.query, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) err = %q, want it to contain %q", tc.query, err, tc.want)
		}
	}
}

func TestQueryJSONRoundTripAndLenientRead(t *testing.T) {
	q, _, err := Parse(mustShowQuery+" gpu_ram in [16,24] driver_version>=535.86.05 limit=3 static_ip=null", ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(q)
	var back Query
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(q, back); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	// A hand-written body: numbers as numbers or strings, bare values as eq.
	var h Query
	err = json.Unmarshal([]byte(`{"num_gpus":{"gte":2},"gpu_name":"RTX 4090","limit":"10","allocated_storage":"20",
		"order":[["dph_total"]],"type":"bid","geolocation":{"in":["US","CA"]},"gpu_ram":{"in":[16000,24000]}}`), &h)
	if err != nil {
		t.Fatal(err)
	}
	want := Query{
		Filters: map[string]map[string]any{
			"num_gpus":    {"gte": 2.0},
			"gpu_name":    {"eq": "RTX 4090"},
			"geolocation": {"in": []string{"US", "CA"}},
			"gpu_ram":     {"in": []float64{16000, 24000}},
		},
		Order: [][2]string{{"dph_total", "asc"}}, Type: "bid", Limit: 10, AllocatedStorage: 20,
	}
	if d := cmp.Diff(want, h); d != "" {
		t.Errorf("lenient read (-want +got):\n%s", d)
	}
	for _, bad := range []string{`[]`, `{"order":"x"}`, `{"limit":"x"}`, `{"order":[[1,2]]}`} {
		if err := json.Unmarshal([]byte(bad), &h); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
}

// Columns the client does not know (vast has more than the CLI's list) are
// sent with a warning even in strict mode: only the marketplace can say it
// has no such column. A likely typo of a known field is still caught
// before anything is sent, with the fix.
func TestStrictSendsUnknownColumnsWithAWarning(t *testing.T) {
	t.Parallel()
	q, warns, err := Parse("target_reliability>0.9 reliability_mult<2 num_gpus=1", ParseOptions{NoDefault: true, Strict: true})
	if err != nil {
		t.Fatalf("an unknown column was refused: %v", err)
	}
	body := bodyOf(t, q)
	for _, f := range []string{"target_reliability", "reliability_mult"} {
		if _, ok := body[f]; !ok {
			t.Errorf("%s not sent: %v", f, body)
		}
		found := false
		for _, w := range warns {
			found = found || strings.Contains(string(w), f) && strings.Contains(string(w), "sent")
		}
		if !found {
			t.Errorf("no warning that %s is sent unchecked: %q", f, warns)
		}
	}
	if _, _, err := Parse("gpu_rma>=24", ParseOptions{NoDefault: true, Strict: true}); err == nil || !strings.Contains(err.Error(), "did you mean gpu_ram") {
		t.Errorf("typo: %v, want a did-you-mean refusal", err)
	}
}
