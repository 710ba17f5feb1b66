package cmdutil

import (
	"strings"
	"testing"
)

// TestPrintRows: the table is the header and each row's cells, tab
// separated off a terminal; --json is the rows as given; --jq runs over
// that JSON.
func TestPrintRows(t *testing.T) {
	t.Parallel()
	type row struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	rows := []row{{"a", 1}, {"b\x1b[31m", 2}}
	cells := func(r row) []string { return []string{r.Name, strings.Repeat("*", r.Count)} }
	for _, tc := range []struct {
		js   JSONFlags
		want string
	}{
		{JSONFlags{}, "NAME\tCOUNT\na\t*\nb\\x1b[31m\t**\n"},
		{JSONFlags{JSON: true}, "[\n  {\n    \"name\": \"a\",\n    \"count\": 1\n  },\n  {\n    \"name\": \"b\\u001b[31m\",\n    \"count\": 2\n  }\n]\n"},
		{JSONFlags{JSON: true, JQ: ".[].count"}, "1\n2\n"},
	} {
		var out strings.Builder
		if err := PrintRows(&out, tc.js, rows, []string{"NAME", "COUNT"}, cells); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.js, out.String(), tc.want)
		}
	}
	var out strings.Builder
	if err := PrintRows(&out, JSONFlags{JSON: true}, []row(nil), nil, cells); err != nil || out.String() != "null\n" {
		t.Errorf("nil rows as JSON: %q, %v; want null (callers promising [] pass an empty slice)", out.String(), err)
	}
}
