package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// The search request, as vast's server reads it (vast-api.md §3, §4.4):
// a flat JSON object whose keys are columns, each holding an operator map
// ({"gte": 24000.0}, {"in": ["US","CA"]}), beside four reserved keys:
// order ([[column, "asc"|"desc"], …]), type (on-demand, bid, …), limit and
// allocated_storage. The official CLI sends numbers as strings ("2") and
// whole floats as 24000.0, so values are compared by what they mean, not
// how they are spelled. This file is written from those documents alone.

// request is a decoded search body.
type request struct {
	terms   []term
	order   []orderKey
	limit   int
	bid     bool    // type bid (or interruptible): priced from min_bid
	storage float64 // allocated_storage GiB; 0 when not given
}

// colKind is how a column compares.
type colKind uint8

const (
	colNum colKind = iota + 1
	colStr
	colBool
)

// column reads one Offer field by its json name. Columns are found by
// reflection over Offer's tags once, and read through their offsets, so
// that the evaluator knows every column the model has and nothing more.
type column struct {
	name string
	kind colKind
	off  uintptr
	rk   reflect.Kind
}

func (c *column) num(o *Offer) float64 {
	p := unsafe.Add(unsafe.Pointer(o), c.off)
	switch c.rk {
	case reflect.Float64:
		return *(*float64)(p)
	case reflect.Int:
		return float64(*(*int)(p))
	case reflect.Int64:
		return float64(*(*int64)(p))
	case reflect.Bool:
		if *(*bool)(p) {
			return 1
		}
		return 0
	}
	return math.NaN()
}

func (c *column) str(o *Offer) string { return *(*string)(unsafe.Add(unsafe.Pointer(o), c.off)) }

// columns maps each json name of Offer to its column.
var columns = func() map[string]*column {
	out := map[string]*column{}
	t := reflect.TypeFor[Offer]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		c := &column{name: name, off: f.Offset, rk: f.Type.Kind()}
		switch c.rk {
		case reflect.String:
			c.kind = colStr
		case reflect.Bool:
			c.kind = colBool
		case reflect.Float64, reflect.Int, reflect.Int64:
			c.kind = colNum
		default:
			panic("sim: offer column " + name + " has an unsupported type")
		}
		out[name] = c
	}
	return out
}()

// serverAliases are names the server answers for another column
// (vast-api.md §4.4, the server-side list in the CLI's query.py).
var serverAliases = map[string]string{
	"reliability2":   "reliability",
	"dphtotal":       "dph_total",
	"gpu_totalram":   "gpu_total_ram",
	"ubuntu_version": "os_version",
	"driver_version": "driver_vers",
}

// gbColumns are the GB spellings of MB columns: the value is ×1000.
var gbColumns = map[string]string{
	"cpu_ram_GB":      "cpu_ram",
	"gpu_ram_GB":      "gpu_ram",
	"gpu_totalram_GB": "gpu_total_ram",
}

// virtual columns: names the server turns into a test on other columns.
const (
	vGeo         = "geolocation"        // the country code (or the whole string)
	vVerified    = "verified"           // verification == "verified" (vericode)
	vDatacenter  = "datacenter"         // hosting_type == 1
	vTargetRel   = "target_reliability" // expected_reliability >= value
	vAllocated   = "allocated_storage"  // disk_space >= value
	ignoredRents = "rented"             // the backend does not filter on it
)

// term is one (column, operator, value) of the request.
type term struct {
	label string
	col   *column
	op    string
	// the value, read for the column's kind; null (SQL NULL) matches
	// nothing.
	null bool
	nums []float64
	strs []string
	// virtual columns
	geo      bool
	verified bool
	dc       bool
	atLeast  bool // target_reliability, allocated_storage: col >= nums[0]
}

// queryError is a request the server refuses (400 invalid_args).
type queryError struct{ msg string }

func (e *queryError) Error() string { return e.msg }

func refuse(format string, args ...any) error {
	return &queryError{fmt.Sprintf(format, args...)}
}

var operators = map[string]bool{"eq": true, "neq": true, "gt": true, "gte": true, "lt": true, "lte": true, "in": true, "notin": true}

// parseRequest decodes a search body. An empty body is an empty query.
func parseRequest(body []byte) (*request, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		body = []byte("{}")
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, refuse("invalid query: %v", err)
	}
	req := &request{}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := raw[k]
		isMap := bytes.HasPrefix(bytes.TrimSpace(v), []byte("{"))
		switch {
		case k == "order":
			o, err := parseOrder(v)
			if err != nil {
				return nil, err
			}
			req.order = o
			continue
		case k == "type":
			var s *string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, refuse("type: want a string")
			}
			if s != nil {
				req.bid = *s == "bid" || *s == "interruptible"
			}
			continue
		case k == "limit" && !isMap:
			n, ok, err := scalarNumber(v)
			if err != nil {
				return nil, refuse("limit: %v", err)
			}
			if ok {
				req.limit = int(n)
			}
			continue
		case k == vAllocated && !isMap:
			n, ok, err := scalarNumber(v)
			if err != nil {
				return nil, refuse("allocated_storage: %v", err)
			}
			if ok && n > 0 {
				req.storage = n
				t := term{label: fmt.Sprintf("disk_space gte %g", n), col: columns["disk_space"], op: "gte", atLeast: true, nums: []float64{n}}
				req.terms = append(req.terms, t)
			}
			continue
		}
		ops := map[string]any{}
		if isMap {
			if err := unmarshalNumbers(v, &ops); err != nil {
				return nil, refuse("%s: %v", k, err)
			}
		} else {
			var x any
			if err := unmarshalNumbers(v, &x); err != nil {
				return nil, refuse("%s: %v", k, err)
			}
			ops["eq"] = x // a bare value means equal
		}
		opNames := make([]string, 0, len(ops))
		for op := range ops {
			opNames = append(opNames, op)
		}
		slices.Sort(opNames)
		for _, op := range opNames {
			t, keep, err := makeTerm(k, op, ops[op])
			if err != nil {
				return nil, err
			}
			if keep {
				req.terms = append(req.terms, t)
			}
		}
	}
	return req, nil
}

func unmarshalNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// scalarNumber reads a number given as a JSON number or a numeric string;
// ok is false for null.
func scalarNumber(v json.RawMessage) (float64, bool, error) {
	var x any
	if err := unmarshalNumbers(v, &x); err != nil {
		return 0, false, err
	}
	if x == nil {
		return 0, false, nil
	}
	f, ok := asNumber(x, false)
	if !ok {
		return 0, false, fmt.Errorf("want a number, got %s", v)
	}
	return f, true, nil
}

// makeTerm compiles one column/operator/value; keep is false for a term
// the server ignores.
func makeTerm(name, op string, val any) (term, bool, error) {
	if !operators[op] {
		return term{}, false, refuse("%s: unknown operator %q; use eq, neq, gt, gte, lt, lte, in or notin", name, op)
	}
	t := term{label: fmt.Sprintf("%s %s %v", name, op, val), op: op}
	list, isList := val.([]any)
	if isList && op != "in" && op != "notin" {
		return term{}, false, refuse("%s %s: a list needs in or notin", name, op)
	}
	if !isList {
		list = []any{val}
	}
	scale := 1.0
	col := name
	switch name {
	case ignoredRents:
		return term{}, false, nil
	case vGeo:
		t.geo = true
		return t, true, t.readStrings(list)
	case vVerified, vDatacenter:
		t.verified, t.dc = name == vVerified, name == vDatacenter
		return t, true, t.readNumbers(list, colBool, 1, false)
	case vTargetRel, vAllocated:
		// Both are "at least" one number: the operator given is not read.
		if isList {
			return term{}, false, refuse("%s: want one number, not a list", name)
		}
		t.atLeast = true
		t.col = columns["expected_reliability"]
		if name == vAllocated {
			t.col = columns["disk_space"]
		}
		t.op = "gte"
		return t, true, t.readNumbers(list[:1], colNum, 1, false)
	}
	if c, ok := gbColumns[name]; ok {
		col, scale = c, 1000
	} else if c, ok := serverAliases[name]; ok {
		col = c
	}
	c, ok := columns[col]
	if !ok {
		return term{}, false, refuse("%s is not a valid search key", name)
	}
	t.col = c
	if c.kind == colStr {
		return t, true, t.readStrings(list)
	}
	return t, true, t.readNumbers(list, c.kind, scale, col == "driver_vers")
}

// readStrings reads a string column's values: numbers and booleans as
// their text (Python's True and False).
func (t *term) readStrings(list []any) error {
	for _, x := range list {
		switch v := x.(type) {
		case nil:
			t.null = t.null || len(list) == 1
		case string:
			t.strs = append(t.strs, v)
		case json.Number:
			t.strs = append(t.strs, v.String())
		case bool:
			t.strs = append(t.strs, map[bool]string{true: "True", false: "False"}[v])
		default:
			return refuse("%s: want a string, got %v", t.label, x)
		}
	}
	return nil
}

// readNumbers reads a numeric or boolean column's values; a version
// X.Y.Z is the integer driver_vers holds.
func (t *term) readNumbers(list []any, kind colKind, scale float64, version bool) error {
	for _, x := range list {
		if x == nil {
			t.null = t.null || len(list) == 1
			continue
		}
		if s, ok := x.(string); ok && version {
			if n, ok := versionNumber(s); ok {
				t.nums = append(t.nums, n)
				continue
			}
		}
		f, ok := asNumber(x, kind == colBool)
		if !ok {
			return refuse("%s: want a number, got %v", t.label, x)
		}
		t.nums = append(t.nums, f*scale)
	}
	return nil
}

// asNumber reads a JSON number, a numeric string, or a boolean (as 1/0,
// and for a boolean column the words true and false too).
func asNumber(x any, boolean bool) (float64, bool) {
	switch v := x.(type) {
	case json.Number:
		f, err := v.Float64()
		return f, err == nil && !math.IsInf(f, 0)
	case float64:
		return v, true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	case string:
		s := strings.TrimSpace(v)
		if boolean {
			switch strings.ToLower(s) {
			case "true":
				return 1, true
			case "false":
				return 0, true
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

// versionNumber is "535.104.05" as driver_vers: 535104005.
func versionNumber(s string) (float64, bool) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) != 3 {
		return 0, false
	}
	n := 0.0
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || (i > 0 && v > 999) {
			return 0, false
		}
		n = n*1000 + float64(v)
	}
	return n, true
}

// match reports whether o passes the term.
func (t *term) match(o *Offer) bool {
	if t.null {
		return false
	}
	switch {
	case t.geo:
		// Equality takes the country code or the whole location; an
		// ordering compares the code.
		c := o.country()
		return t.compareStr(func(v string) int {
			if v == o.Geolocation && (t.op == "eq" || t.op == "neq" || t.op == "in" || t.op == "notin") {
				return 0
			}
			return strings.Compare(c, v)
		})
	case t.verified:
		return t.compareNum(b01(o.Verification == "verified"))
	case t.dc:
		return t.compareNum(b01(o.HostingType == 1))
	case t.col.kind == colStr:
		s := t.col.str(o)
		return t.compareStr(func(v string) int { return strings.Compare(s, v) })
	}
	return t.compareNum(t.col.num(o))
}

func b01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (t *term) compareNum(have float64) bool {
	switch t.op {
	case "in", "notin":
		return slices.Contains(t.nums, have) == (t.op == "in")
	}
	return holds(t.op, cmp.Compare(have, t.nums[0]))
}

// compareStr applies the operator to c, the offer's value compared with
// each of the term's.
func (t *term) compareStr(c func(v string) int) bool {
	switch t.op {
	case "in", "notin":
		hit := slices.ContainsFunc(t.strs, func(v string) bool { return c(v) == 0 })
		return hit == (t.op == "in")
	}
	return holds(t.op, c(t.strs[0]))
}

// holds says whether a comparison's result c (-1, 0, 1) satisfies op.
func holds(op string, c int) bool {
	switch op {
	case "eq":
		return c == 0
	case "neq":
		return c != 0
	case "gt":
		return c > 0
	case "gte":
		return c >= 0
	case "lt":
		return c < 0
	}
	return c <= 0 // lte
}

// matches reports whether o passes every term.
func (r *request) matches(o *Offer) bool {
	for i := range r.terms {
		if !r.terms[i].match(o) {
			return false
		}
	}
	return true
}

// orderKey is one sort column; a name the server does not know is
// dropped, as the server ignores it.
type orderKey struct {
	name string
	col  *column
	desc bool
}

func parseOrder(v json.RawMessage) ([]orderKey, error) {
	var pairs [][]any
	if err := json.Unmarshal(v, &pairs); err != nil {
		return nil, refuse("order: want [[column, \"asc\"|\"desc\"], ...]")
	}
	var out []orderKey
	for _, p := range pairs {
		if len(p) < 1 || len(p) > 2 {
			return nil, refuse("order: want [column, direction], got %v", p)
		}
		name, ok := p[0].(string)
		if !ok {
			return nil, refuse("order: a column is a string, got %v", p[0])
		}
		desc := false
		if len(p) == 2 {
			d, ok := p[1].(string)
			if !ok {
				return nil, refuse("order: a direction is a string, got %v", p[1])
			}
			desc = strings.EqualFold(d, "desc")
		}
		if a, ok := serverAliases[name]; ok {
			name = a
		}
		c, ok := columns[name]
		if !ok {
			continue
		}
		out = append(out, orderKey{name: name, col: c, desc: desc})
	}
	return out, nil
}

// compareOffers orders two offers by keys; ties compare equal (callers
// sort stably, so ties keep the listing's order).
func compareOffers(keys []orderKey, a, b *Offer) int {
	for _, k := range keys {
		var c int
		if k.col.kind == colStr {
			c = strings.Compare(k.col.str(a), k.col.str(b))
		} else {
			c = cmp.Compare(k.col.num(a), k.col.num(b))
		}
		if c != 0 {
			if k.desc {
				return -c
			}
			return c
		}
	}
	return 0
}

// orderName names the keys, for caching a permutation per order.
func orderName(keys []orderKey) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k.name)
		if k.desc {
			b.WriteString("-")
		}
		b.WriteString(",")
	}
	return b.String()
}

// priceBounds is the dph_total range the request's terms allow: an offer
// outside it fails one of them. ok is false when nothing bounds the price.
func (r *request) priceBounds() (lo, hi float64, ok bool) {
	lo, hi = math.Inf(-1), math.Inf(1)
	for _, t := range r.terms {
		if t.col == nil || t.col.name != "dph_total" || t.null || t.atLeast || len(t.nums) == 0 {
			continue
		}
		v := t.nums[0]
		switch t.op {
		case "gt", "gte":
			lo, ok = max(lo, v), true
		case "lt", "lte":
			hi, ok = min(hi, v), true
		case "eq":
			lo, hi, ok = max(lo, v), min(hi, v), true
		}
	}
	return lo, hi, ok
}

// sortsByAvailability tells whether the order reads the columns that change
// with every rental (rentable, rented).
func (r *request) sortsByAvailability() bool {
	for _, k := range r.order {
		if k.name == "rentable" || k.name == "rented" {
			return true
		}
	}
	return false
}
