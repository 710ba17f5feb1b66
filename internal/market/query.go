package market

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Query is the JSON object the vastai CLI posts to /api/v0/bundles/: one entry
// per field, each a map from operator (eq, neq, gt, gte, lt, lte, in, notin)
// to a value (string, bool, nil, float64; for in/notin []string, or []float64
// on converted fields, or []any for a merged != list of mixed types), plus the
// request keys order, type, limit and allocated_storage. MarshalJSON writes it
// flat, exactly as the CLI does; UnmarshalJSON reads that form back.
type Query struct {
	Filters          map[string]map[string]any
	Order            [][2]string // [field, "asc"|"desc"]
	Type             string      // "on-demand", "bid", "reserved"
	Limit            int         // 0: not sent
	AllocatedStorage float64     // GiB, always sent
}

// ParseOptions are the `vastai search offers` flags that shape the query.
type ParseOptions struct {
	NoDefault bool    // -n: start from {} instead of the default filters
	Type      string  // "" means on-demand; "interruptible" becomes "bid"
	Order     string  // -o, "" means "score-"
	Limit     int     // --limit, 0 means not sent
	Storage   float64 // --storage GiB, 0 means the CLI default 5.0
	// Strict refuses, instead of sending as the vastai CLI does: a field
	// the client does not know that is a likely typo of one it does
	// (others are sent with a warning: the marketplace decides), and a
	// list left open (`geolocation in [US,`, which the CLI reads as [US]).
	Strict bool
}

// Warning is a non-fatal remark the CLI would print on stderr
// (unrecognised field, repeated != merged into notin, ...).
type Warning string

// ParseError is a query the CLI would reject. Index is the 1-based clause
// number (0 for text between clauses), Pos the 1-based column of Term.
type ParseError struct {
	Index int
	Term  string
	Pos   int
	Msg   string
}

func (e *ParseError) Error() string {
	if e.Index == 0 {
		return fmt.Sprintf("text %q at column %d: %s", e.Term, e.Pos, e.Msg)
	}
	return fmt.Sprintf("term %d %q at column %d: %s", e.Index, e.Term, e.Pos, e.Msg)
}

const validOps = "use one of = != > >= < <= in notin"

// opNames maps every spelling the CLI accepts to the operator it sends (§4.2).
var opNames = map[string]string{
	"=": "eq", "==": "eq", "eq": "eq",
	"!=": "neq", "neq": "neq", "noteq": "neq", "not eq": "neq",
	">": "gt", "gt": "gt", ">=": "gte", "gte": "gte",
	"<": "lt", "lt": "lt", "<=": "lte", "lte": "lte",
	"in": "in", "notin": "notin", "not in": "notin", "nin": "notin",
}

// wordOps are the word operators in the order the CLI's regex tries them.
var wordOps = []string{"lte", "lt", "gte", "gt", "nin", "neq", "eq", "not eq", "noteq", "not in", "notin", "in"}

// clientAlias is the CLI's alias table (§4.4), applied to filters and order keys.
var clientAlias = map[string]string{
	"cuda_vers":      "cuda_max_good",
	"dph":            "dph_total",
	"dlperf_usd":     "dlperf_per_dphtotal",
	"flops_usd":      "flops_per_dphtotal",
	"display_active": "gpu_display_active",
}

// multiplier converts query units to wire units (§4.3 step 10).
var multiplier = map[string]float64{
	"cpu_ram":       1000,
	"gpu_ram":       1000,
	"gpu_total_ram": 1000,
	"duration":      86400,
}

// knownFields is the CLI's recognised set (§4.7).
var knownFields = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`bw_nvlink cluster_id compute_cap cpu_arch cpu_cores
		cpu_cores_effective cpu_ghz cpu_ram cuda_max_good datacenter direct_port_count disk_bw
		disk_space dlperf dlperf_per_dphtotal dph_total driver_version duration external
		flops_per_dphtotal geolocation gpu_arch gpu_display_active gpu_frac gpu_max_power
		gpu_max_temp gpu_mem_bw gpu_name gpu_ram gpu_total_ram has_avx host_id id inet_down
		inet_up inet_down_cost inet_up_cost machine_id min_bid mobo_name num_gpus pci_gen
		pcie_bw reliability rentable rented static_ip storage_cost total_flops ubuntu_version
		verification verified vms_enabled`) {
		knownFields[f] = true
	}
}

// KnownField reports whether the CLI recognises a (canonical) field name.
func KnownField(name string) bool { return knownFields[name] }

// clause is one match of the CLI's clause regex (§4.1).
type clause struct {
	field, op, value string
	start, end       int // byte offsets in the trimmed query
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isOpByte(c byte) bool { return c == '=' || c == '<' || c == '>' || c == '!' }

func skipSpaces(s string, i int) int {
	for i < len(s) && s[i] == ' ' {
		i++
	}
	return i
}

// scanClause matches the CLI's regex
//
//	([a-zA-Z0-9_]+)( *[=><!]+| +(?:[lg]te?|nin|neq|eq|not ?eq|not ?in|in) )?( *)(\[[^\]]+\]|"[^"]+"|[^ ]+)?( *)
//
// at s[i], which must be a word byte.
func scanClause(s string, i, lastClose, lastQuote int) clause {
	c := clause{start: i}
	j := i
	for j < len(s) && isWordByte(s[j]) {
		j++
	}
	c.field = s[i:j]
	pos := j
	// Operator, form (a): spaces then a run of = < > !.
	k := skipSpaces(s, j)
	m := k
	for m < len(s) && isOpByte(s[m]) {
		m++
	}
	if m > k {
		c.op = strings.TrimLeft(s[j:m], " ")
		pos = m
	} else if k > j {
		// Form (b): one or more spaces, a word, exactly one space.
		for _, w := range wordOps {
			if strings.HasPrefix(s[k:], w) && k+len(w) < len(s) && s[k+len(w)] == ' ' {
				c.op = w
				pos = k + len(w) + 1
				break
			}
		}
	}
	pos = skipSpaces(s, pos)
	// Value.
	if pos < len(s) {
		v := -1
		switch s[pos] {
		case '[':
			// Search only when a closer follows, so a run of unclosed "[" does
			// not rescan the rest of the query for each clause.
			if pos < lastClose {
				if n := strings.IndexByte(s[pos+1:], ']'); n > 0 {
					v = pos + 1 + n + 1
				}
			}
		case '"':
			if pos < lastQuote {
				if n := strings.IndexByte(s[pos+1:], '"'); n > 0 {
					v = pos + 1 + n + 1
				}
			}
		}
		if v < 0 {
			v = pos
			for v < len(s) && s[v] != ' ' {
				v++
			}
		}
		c.value = s[pos:v]
		pos = v
	}
	c.end = skipSpaces(s, pos)
	return c
}

// pyStrip trims Python's str.strip() whitespace.
func pyStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f })
}

func column(s string, i int) int { return utf8.RuneCountInString(s[:i]) + 1 }

// Parse turns a `vastai search offers` query and its flags into the request
// body the CLI would post (vast-api.md §3–§4), with the deliberate differences
// of §16: repeated != on a field becomes notin, list values on converted
// fields are converted per item, and it never panics.
func Parse(text string, opts ParseOptions) (Query, []Warning, error) {
	var warns []Warning
	s := pyStrip(text)
	if !utf8.ValidString(s) {
		// JSON cannot carry it faithfully, and argv from a shell is text.
		i := 0
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return Query{}, nil, &ParseError{Term: s[i : i+1], Pos: column(s, i), Msg: "the query is not valid UTF-8"}
	}
	var clauses []clause
	lastClose, lastQuote := strings.LastIndexByte(s, ']'), strings.LastIndexByte(s, '"')
	for i := 0; i < len(s); {
		if !isWordByte(s[i]) {
			j := i
			for j < len(s) && !isWordByte(s[j]) {
				j++
			}
			return Query{}, nil, &ParseError{Term: s[i:j], Pos: column(s, i),
				Msg: "unexpected text between clauses; did you forget to quote your query? clauses are field op value, e.g. num_gpus>=2, separated by spaces"}
		}
		c := scanClause(s, i, lastClose, lastQuote)
		clauses = append(clauses, c)
		i = c.end
	}

	res := map[string]map[string]any{}
	if !opts.NoDefault {
		res["verified"] = map[string]any{"eq": true}
		res["external"] = map[string]any{"eq": false}
		res["rentable"] = map[string]any{"eq": true}
	}
	merged := map[string]bool{} // fields whose notin holds merged != values
	var mergedOrder []string
	warned := map[string]bool{}
	for n, c := range clauses {
		perr := func(msg string, args ...any) error {
			return &ParseError{Index: n + 1, Term: strings.TrimRight(s[c.start:c.end], " "), Pos: column(s, c.start), Msg: fmt.Sprintf(msg, args...)}
		}
		// 1. Trim , [ ] from both ends.
		value := strings.Trim(c.value, ",[]")
		// 2. Client aliases.
		fieldName := c.field
		if a, ok := clientAlias[fieldName]; ok {
			fieldName = a
		}
		// 5. Operator (checked before the conversions so errors name it first).
		op, ok := opNames[c.op]
		if !ok {
			if c.op == "" {
				if n > 0 {
					// `gpu_name=RTX 4090`: a value with a space in it.
					if prev := clauses[n-1]; (prev.op == "=" || prev.op == "!=") && prev.value != "" {
						return Query{}, nil, perr("missing operator after %q; if it belongs to the value before it, write %s%s%s_%s (the query language spells spaces in values as _)",
							c.field, prev.field, prev.op, prev.value, c.field)
					}
				}
				return Query{}, nil, perr("missing operator after %q; %s", c.field, validOps)
			}
			return Query{}, nil, perr("unknown operator %q; %s", c.op, validOps)
		}
		isList := op == "in" || op == "notin"
		if opts.Strict && isList && strings.HasPrefix(c.value, "[") && !strings.HasSuffix(c.value, "]") {
			return Query{}, nil, perr("the list %s is not closed: write %s]", c.value, strings.TrimRight(c.value, ","))
		}
		// 3. driver_version A.B.C → integer (scalars; lists below, per item).
		var stored any
		converted := false
		if fieldName == "driver_version" && !isList && strings.Contains(value, ".") {
			v, err := numericVersion(value)
			if err != nil {
				return Query{}, nil, perr("%v", err)
			}
			stored, converted = v, true
		}
		// 4. Unknown fields are sent unchanged, with a warning.
		//    Strict refuses only a likely typo of a known field: vast has
		//    columns the client does not know (target_reliability,
		//    reliability_mult), and only the marketplace can refuse those.
		if opts.Strict && !knownFields[fieldName] && noColumn(fieldName) {
			if s := suggestField(fieldName); s != "" {
				return Query{}, nil, perr("unknown field %q: did you mean %s? (to send it as written, add --send-unknown)", fieldName, s)
			}
		}
		if !knownFields[fieldName] && !warned[fieldName] {
			warned[fieldName] = true // once per field, not once per clause
			warns = append(warns, unknownFieldWarning(fieldName))
		}
		// 6. Lists.
		var items []string
		if isList {
			for _, it := range strings.Split(value, ",") {
				if it = pyStrip(it); it != "" {
					items = append(items, it)
				}
			}
		}
		// 7. Blank values.
		if (isList && len(items) == 0) || (!isList && !converted && value == "") {
			return Query{}, nil, perr("value cannot be blank; write field op value, e.g. %s%s2", c.field, firstNonEmpty(c.op, "="))
		}
		// 8. Wildcards delete the field, defaults included.
		if !isList && !converted && (value == "any" || value == "*" || value == "?") {
			if op != "eq" {
				return Query{}, nil, perr("wildcard %q only makes sense with = (it drops the filter on %s)", value, fieldName)
			}
			delete(res, fieldName)
			delete(merged, fieldName)
			continue
		}
		if !converted {
			// 9. _ → space, then trim ".
			if isList {
				for i, it := range items {
					items[i] = strings.Trim(strings.ReplaceAll(it, "_", " "), `"`)
				}
			} else {
				value = strings.Trim(strings.ReplaceAll(value, "_", " "), `"`)
			}
			// 10. Unit multipliers; 11. true/false/null; lists stay strings.
			mult, hasMult := multiplier[fieldName]
			switch {
			case hasMult && isList:
				fs := make([]float64, len(items))
				for i, it := range items {
					f, err := pyFloat(it)
					if err != nil {
						return Query{}, nil, perr("could not convert %q to a number; %s takes a plain number, e.g. %s>=24", it, fieldName, fieldName)
					}
					fs[i] = f * mult
				}
				stored = fs
			case hasMult:
				f, err := pyFloat(value)
				if err != nil {
					return Query{}, nil, perr("could not convert %q to a number; %s takes a plain number, e.g. %s>=24", value, fieldName, fieldName)
				}
				stored = f * mult
			case fieldName == "driver_version" && isList:
				fs := make([]float64, len(items))
				for i, it := range items {
					var err error
					if strings.Contains(it, ".") {
						fs[i], err = numericVersion(it)
					} else {
						fs[i], err = pyFloat(it)
					}
					if err != nil {
						return Query{}, nil, perr("bad driver version %q in list; expected X.Y.Z, e.g. 535.86.05", it)
					}
				}
				stored = fs
			case isList:
				stored = items
			default:
				switch value {
				case "true", "True":
					stored = true
				case "false", "False":
					stored = false
				case "None", "null":
					stored = nil
				default:
					stored = value
				}
			}
		}
		// 12. Store; same operator overwrites, except repeated != (§16).
		m := res[fieldName]
		if m == nil {
			m = map[string]any{}
			res[fieldName] = m
		}
		if op == "notin" {
			delete(merged, fieldName) // the user's own notin replaces ours
		}
		if prev, had := m["neq"]; op == "neq" && (had && !equalValue(prev, stored) || merged[fieldName]) {
			var list any
			if had {
				list = appendList(m["notin"], prev, stored)
			} else {
				list = appendList(m["notin"], stored)
			}
			delete(m, "neq")
			m["notin"] = list
			if !merged[fieldName] {
				mergedOrder = append(mergedOrder, fieldName)
			}
			merged[fieldName] = true
			continue
		}
		m[op] = stored
	}

	// One note per merged field, with its final list.
	for _, f := range mergedOrder {
		if l, ok := res[f]["notin"]; ok && merged[f] {
			warns = append(warns, Warning(fmt.Sprintf("repeated %s!= merged into %s notin %s (the vast CLI would keep only the last)", f, f, listString(l))))
		}
	}

	q := Query{Filters: res, Type: opts.Type, Limit: opts.Limit, AllocatedStorage: opts.Storage}
	switch q.Type {
	case "":
		q.Type = "on-demand"
	case "interruptible":
		q.Type = "bid"
	}
	if q.AllocatedStorage == 0 {
		q.AllocatedStorage = 5.0
	}
	order := opts.Order
	if order == "" {
		order = "score-"
	}
	q.Order = ParseOrder(order)
	// The request keys are written after the query, so clauses on them are lost.
	delete(res, "order")
	delete(res, "type")
	delete(res, "allocated_storage")
	if q.Limit != 0 {
		delete(res, "limit")
	}
	return q, warns, nil
}

// ParseOrder parses an -o value (§4.6): comma-separated fields, "-" at either
// end for descending, "+" for ascending, client aliases applied.
func ParseOrder(s string) [][2]string {
	order := [][2]string{}
	for _, piece := range strings.Split(s, ",") {
		f := pyStrip(piece)
		if f == "" {
			continue
		}
		dir := "asc"
		if strings.HasPrefix(f, "-") || strings.HasSuffix(f, "-") {
			dir = "desc"
			f = strings.Trim(f, "-")
		}
		if strings.HasPrefix(f, "+") || strings.HasSuffix(f, "+") {
			dir = "asc"
			f = strings.Trim(f, "+")
		}
		if a, ok := clientAlias[f]; ok {
			f = a
		}
		order = append(order, [2]string{f, dir})
	}
	return order
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// numericVersion turns "535.86.05" into 535086005 as the CLI does: three parts,
// each zero-padded to three digits.
func numericVersion(v string) (float64, error) {
	parts := strings.Split(v, ".")
	bad := fmt.Errorf("invalid driver version %q; expected X.Y.Z, e.g. 535.86.05", v)
	if len(parts) != 3 {
		return 0, bad
	}
	var b strings.Builder
	for _, p := range parts {
		for _, r := range p {
			if r < '0' || r > '9' {
				return 0, bad
			}
		}
		if len(p) < 3 {
			b.WriteString(strings.Repeat("0", 3-len(p)))
		}
		b.WriteString(p)
	}
	if b.Len() > 15 { // beyond float64's exact integers
		return 0, bad
	}
	n, err := strconv.ParseInt(b.String(), 10, 64)
	if err != nil {
		return 0, bad
	}
	return float64(n), nil
}

// pyFloat is Python's float() for the inputs a query can hold; it refuses
// what JSON cannot carry (NaN, infinities) and Go-only forms (hex).
func pyFloat(s string) (float64, error) {
	s = pyStrip(s)
	if strings.ContainsAny(s, "xXpP_") {
		return 0, strconv.ErrSyntax
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !finite(f) {
		return 0, strconv.ErrSyntax
	}
	return f, nil
}

func equalValue(a, b any) bool {
	switch a.(type) {
	case []string, []float64, []any:
		return false
	}
	switch b.(type) {
	case []string, []float64, []any:
		return false
	}
	return a == b
}

// appendList builds the merged notin list, keeping it []string or []float64
// when every item has that type.
func appendList(existing any, vals ...any) any {
	var all []any
	switch l := existing.(type) {
	case []string:
		for _, v := range l {
			all = append(all, v)
		}
	case []float64:
		for _, v := range l {
			all = append(all, v)
		}
	case []any:
		all = append(all, l...)
	}
	for _, v := range vals {
		dup := false
		for _, e := range all {
			if e == v {
				dup = true
			}
		}
		if !dup {
			all = append(all, v)
		}
	}
	return normalizeList(all)
}

func normalizeList(all []any) any {
	ss, fs := make([]string, 0, len(all)), make([]float64, 0, len(all))
	for _, v := range all {
		switch x := v.(type) {
		case string:
			ss = append(ss, x)
		case float64:
			fs = append(fs, x)
		}
	}
	switch {
	case len(ss) == len(all):
		return ss
	case len(fs) == len(all) && len(all) > 0:
		return fs
	}
	return all
}

func listString(l any) string {
	b, _ := json.Marshal(l)
	return string(b)
}

// noColumn reports whether the marketplace has no column by that name.
func noColumn(f string) bool {
	_, known := lookupField(f)
	_, gb := serverGB[f]
	return !known && !gb
}

// unknownFieldWarning says a field is sent unchanged and, for a likely typo
// (one not naming a real server column), which known field was meant.
func unknownFieldWarning(f string) Warning {
	if noColumn(f) {
		if s := suggestField(f); s != "" {
			return Warning(fmt.Sprintf("unknown field %q — did you mean %s? (sent unchanged)", f, s))
		}
	}
	return Warning(fmt.Sprintf("unknown field %q: not in the CLI's recognised set, sent unchanged (the marketplace decides whether it is a column)", f))
}

func suggestField(f string) string {
	if len(f) > 40 {
		return ""
	}
	best, bestD := "", 3
	if len(f) <= 4 {
		bestD = 2
	}
	names := make([]string, 0, len(knownFields)+len(clientAlias))
	for k := range knownFields {
		names = append(names, k)
	}
	for k := range clientAlias {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if d := editDistance(f, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance with adjacent transpositions
// counted as one edit, so "gpu_rma" is one edit from "gpu_ram".
func editDistance(a, b string) int {
	n, m := len(a), len(b)
	d := make([][]int, n+1)
	for i := range d {
		d[i] = make([]int, m+1)
		d[i][0] = i
	}
	for j := 0; j <= m; j++ {
		d[0][j] = j
	}
	for i := 1; i <= n; i++ {
		for j := 1; j <= m; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[n][m]
}
