package market

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// CompileError is a query the server would refuse (the simulator answers 400).
type CompileError struct {
	Field string
	Op    string
	Msg   string
}

func (e *CompileError) Error() string {
	if e.Op == "" {
		return fmt.Sprintf("field %q: %s", e.Field, e.Msg)
	}
	return fmt.Sprintf("field %q op %q: %s", e.Field, e.Op, e.Msg)
}

// Filter is a compiled query: one closure per term, all ANDed. When every
// term has a fast form (see fastTerm), Match evaluates those instead.
type Filter struct {
	preds []func(*Offer) bool
	terms []string // one label per pred, for explanations
	fast  []fastTerm
	// allFast is set when fast holds every term, in the order of preds.
	allFast bool
	// run is fast in evaluation order: numbers first, strings after.
	run []fastTerm
}

// Terms labels each compiled term ("num_gpus gte 2"), in evaluation order.
func (f *Filter) Terms() []string { return f.terms }

// TermCount is how many offers a term removed.
type TermCount struct {
	Term    string
	Removed int
}

// Removed counts, for each term, the offers it was the first to reject, so
// the counts add up to the offers the whole filter removes.
func (f *Filter) Removed(offers []Offer) []TermCount {
	out := make([]TermCount, len(f.terms))
	for i, t := range f.terms {
		out[i].Term = t
	}
	for i := range offers {
		for j, p := range f.preds {
			if !p(&offers[i]) {
				out[j].Removed++
				break
			}
		}
	}
	return out
}

// Match reports whether an offer passes every term.
func (f *Filter) Match(o *Offer) bool {
	if f.allFast {
		for i := range f.run {
			if !f.run[i].match(o) {
				return false
			}
		}
		return true
	}
	return f.matchClosures(o)
}

// matchClosures is Match on the closures alone.
func (f *Filter) matchClosures(o *Offer) bool {
	for _, p := range f.preds {
		if !p(o) {
			return false
		}
	}
	return true
}

// Compile builds a Filter with the server's semantics (vast-api.md §4.4):
// server renames and GB columns, geolocation by country, datacenter and
// verified as virtual booleans, allocated_storage as disk_space >=, rented
// ignored, numeric strings compared as numbers. An unknown column is an error.
func Compile(q Query) (*Filter, error) {
	f := &Filter{allFast: true}
	names := make([]string, 0, len(q.Filters))
	for n := range q.Filters {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		ops := q.Filters[name]
		opNames := make([]string, 0, len(ops))
		for op := range ops {
			opNames = append(opNames, op)
		}
		slices.Sort(opNames)
		for _, op := range opNames {
			p, err := compileTerm(name, op, ops[op])
			if err != nil {
				return nil, err
			}
			if p != nil {
				f.preds = append(f.preds, p)
				f.terms = append(f.terms, fmt.Sprintf("%s %s %s", name, op, listString(ops[op])))
				if t, ok := fastTermOf(name, op, ops[op]); ok && f.allFast {
					f.fast = append(f.fast, t)
				} else {
					f.allFast, f.fast = false, nil
				}
			}
		}
	}
	if q.AllocatedStorage > 0 {
		min := q.AllocatedStorage
		f.preds = append(f.preds, func(o *Offer) bool { return o.DiskSpace >= min })
		f.terms = append(f.terms, fmt.Sprintf("allocated_storage: disk_space gte %g", min))
		if f.allFast {
			f.fast = append(f.fast, fastTerm{kind: fastF64, op: opGte, off: plainFields["disk_space"].off, v: min})
		}
	}
	if f.allFast {
		// A number costs one load and compare; strings cost more.
		f.run = slices.Clone(f.fast)
		slices.SortStableFunc(f.run, func(a, b fastTerm) int { return cmp.Compare(b2f(a.kind >= fastStr), b2f(b.kind >= fastStr)) })
	}
	return f, nil
}

var validCompileOps = map[string]bool{"eq": true, "neq": true, "gt": true, "gte": true, "lt": true, "lte": true, "in": true, "notin": true}

// fastTermOf is the fast form of a term compileTerm compiled, if any.
func fastTermOf(name, op string, val any) (fastTerm, bool) {
	switch name {
	case "rented", "allocated_storage", "target_reliability":
		return fastTerm{}, false
	case "geolocation":
		return fastTermFor(name, name, op, val, 1)
	}
	col, scale := name, 1.0
	if c, ok := serverGB[name]; ok {
		col, scale = c, 1000
	} else if c, ok := serverRename[name]; ok {
		col = c
	}
	if fd, ok := offerFields[col]; !ok || fd.kind == kindBool {
		return fastTerm{}, false
	}
	return fastTermFor(name, col, op, val, scale)
}

// compileTerm returns nil for a term the server ignores.
func compileTerm(name, op string, val any) (func(*Offer) bool, error) {
	if !validCompileOps[op] {
		return nil, &CompileError{Field: name, Op: op, Msg: "unknown operator; use one of eq neq gt gte lt lte in notin"}
	}
	scale := 1.0
	switch name {
	case "rented":
		return nil, nil // the backend does not filter on rented (§3, §14)
	case "geolocation":
		return compileGeo(name, op, val)
	case "allocated_storage":
		v, ok, err := numValue(val, false)
		if err != nil {
			return nil, &CompileError{Field: name, Op: op, Msg: err.Error()}
		}
		if !ok {
			return func(*Offer) bool { return false }, nil
		}
		return func(o *Offer) bool { return o.DiskSpace >= v }, nil
	case "target_reliability":
		// expected_reliability is not modelled; reliability stands in.
		v, ok, err := numValue(val, false)
		if err != nil {
			return nil, &CompileError{Field: name, Op: op, Msg: err.Error()}
		}
		if !ok {
			return func(*Offer) bool { return false }, nil
		}
		return func(o *Offer) bool { return o.Reliability >= v }, nil
	}
	col := name
	if c, ok := serverGB[name]; ok {
		col, scale = c, 1000
	} else if c, ok := serverRename[name]; ok {
		col = c
	}
	fd, ok := offerFields[col]
	if !ok {
		return nil, &CompileError{Field: name, Msg: "unknown column"}
	}
	var p func(*Offer) bool
	var err error
	if fd.kind == kindStr {
		p, err = strTerm(fd.str, op, val)
	} else {
		p, err = numTerm(fd.num, op, val, fd.kind == kindBool, scale)
	}
	if err != nil {
		return nil, &CompileError{Field: name, Op: op, Msg: err.Error()}
	}
	return p, nil
}

// numValue converts a query value for a numeric or boolean column. ok is
// false for null, which matches nothing (SQL NULL semantics).
func numValue(v any, boolean bool) (float64, bool, error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case bool:
		return b2f(x), true, nil
	case float64:
		return x, true, nil
	case int:
		return float64(x), true, nil
	case int64:
		return float64(x), true, nil
	case string:
		s := strings.TrimSpace(x)
		if boolean {
			switch strings.ToLower(s) {
			case "true", "t", "yes":
				return 1, true, nil
			case "false", "f", "no":
				return 0, true, nil
			}
		}
		if strings.Count(s, ".") == 2 {
			if f, err := numericVersion(s); err == nil {
				return f, true, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !finite(f) {
			return 0, false, fmt.Errorf("want a number, got %q", x)
		}
		return f, true, nil
	}
	return 0, false, fmt.Errorf("want a number, got %T", v)
}

func listValues(v any) ([]any, bool) {
	switch l := v.(type) {
	case []any:
		return l, true
	case []string:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out, true
	case []float64:
		out := make([]any, len(l))
		for i, f := range l {
			out[i] = f
		}
		return out, true
	}
	return nil, false
}

// numTerm compiles a term on a numeric or boolean column; the query's
// values are scaled to the column's unit.
func numTerm(get func(*Offer) float64, op string, val any, boolean bool, scale float64) (func(*Offer) bool, error) {
	return term(get, op, val, scaledNum(boolean, scale))
}

// scaledNum parses a query value for a numeric or boolean column (numValue)
// and scales it to the column's unit.
func scaledNum(boolean bool, scale float64) func(any) (float64, bool, error) {
	return func(v any) (float64, bool, error) {
		f, ok, err := numValue(v, boolean)
		return f * scale, ok, err
	}
}

// term compiles a comparison of get's value with val, parsed by value:
// in and notin against a list (or one value), else eq, neq, gt, gte, lt
// or lte (the default). A null value matches nothing, or with neq
// everything.
func term[T cmp.Ordered](get func(*Offer) T, op string, val any, value func(any) (T, bool, error)) (func(*Offer) bool, error) {
	if op == "in" || op == "notin" {
		set, err := valueList(val, value)
		if err != nil {
			return nil, err
		}
		in := op == "in"
		return func(o *Offer) bool { return slices.Contains(set, get(o)) == in }, nil
	}
	if _, isList := listValues(val); isList {
		return nil, fmt.Errorf("a list needs in or notin")
	}
	v, ok, err := value(val)
	if err != nil {
		return nil, err
	}
	if !ok {
		never := op != "neq"
		return func(*Offer) bool { return !never }, nil
	}
	switch op {
	case "eq":
		return func(o *Offer) bool { return get(o) == v }, nil
	case "neq":
		return func(o *Offer) bool { return get(o) != v }, nil
	case "gt":
		return func(o *Offer) bool { return get(o) > v }, nil
	case "gte":
		return func(o *Offer) bool { return get(o) >= v }, nil
	case "lt":
		return func(o *Offer) bool { return get(o) < v }, nil
	default: // lte
		return func(o *Offer) bool { return get(o) <= v }, nil
	}
}

func strValue(v any) (string, bool, error) {
	switch x := v.(type) {
	case nil:
		return "", false, nil
	case string:
		return x, true, nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true, nil
	case bool:
		if x {
			return "True", true, nil
		}
		return "False", true, nil
	}
	return "", false, fmt.Errorf("want a string, got %T", v)
}

// valueList is an in/notin term's values, parsed by value: a list, or one
// value as a list of one; null members are left out.
func valueList[T any](val any, value func(any) (T, bool, error)) ([]T, error) {
	items, ok := listValues(val)
	if !ok {
		items = []any{val}
	}
	set := make([]T, 0, len(items))
	for _, it := range items {
		x, ok, err := value(it)
		if err != nil {
			return nil, err
		}
		if ok {
			set = append(set, x)
		}
	}
	return set, nil
}

// strList is an in/notin term's strings.
func strList(val any) ([]string, error) { return valueList(val, strValue) }

func strTerm(get func(*Offer) string, op string, val any) (func(*Offer) bool, error) {
	return term(get, op, val, strValue)
}

// compileGeo compares the offer's country code, and also accepts the full
// geolocation string ("Washington, US").
func compileGeo(name, op string, val any) (func(*Offer) bool, error) {
	is := func(o *Offer, v string) bool { return o.Country() == v || o.Geolocation == v }
	switch op {
	case "in", "notin":
		set, err := strList(val)
		if err != nil {
			return nil, &CompileError{Field: name, Op: op, Msg: err.Error()}
		}
		in := op == "in"
		return func(o *Offer) bool {
			c := o.Country()
			return (slices.Contains(set, c) || slices.Contains(set, o.Geolocation)) == in
		}, nil
	}
	p, err := strTerm(func(o *Offer) string { return o.Country() }, op, val)
	if err != nil {
		return nil, &CompileError{Field: name, Op: op, Msg: err.Error()}
	}
	switch op {
	case "eq", "neq":
		v, ok, _ := strValue(val)
		if !ok {
			return p, nil
		}
		eq := op == "eq"
		return func(o *Offer) bool { return is(o, v) == eq }, nil
	}
	return p, nil
}

// sortKey is a compiled order key.
type sortKey struct {
	f    field
	desc bool
}

func compileOrder(order [][2]string) []sortKey {
	var keys []sortKey
	for _, k := range order {
		fd, ok := lookupField(k[0])
		if !ok {
			continue // unknown keys are ignored, as the server does
		}
		keys = append(keys, sortKey{f: fd, desc: strings.EqualFold(k[1], "desc")})
	}
	return keys
}

func compareBy(keys []sortKey, a, b *Offer) int {
	for _, k := range keys {
		var c int
		if k.f.kind == kindStr {
			c = strings.Compare(k.f.str(a), k.f.str(b))
		} else {
			c = cmp.Compare(k.f.num(a), k.f.num(b))
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

// SortOffers orders offers in place by the keys of a query's order (stable,
// multi-key; unknown keys are ignored).
func SortOffers(offers []Offer, order [][2]string) {
	keys := compileOrder(order)
	if len(keys) == 0 {
		return
	}
	// Sort indices, not the ~700-byte structs, then permute once.
	idx := make([]int32, len(offers))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortStableFunc(idx, func(a, b int32) int { return compareBy(keys, &offers[a], &offers[b]) })
	sorted := make([]Offer, len(offers))
	for i, j := range idx {
		sorted[i] = offers[j]
	}
	copy(offers, sorted)
}

// Select is the server's search: filter, order, and cap at min(q.Limit,
// maxResults); a zero limit means maxResults, and maxResults <= 0 no cap.
func Select(offers []Offer, q Query, maxResults int) ([]Offer, error) {
	f, err := Compile(q)
	if err != nil {
		return nil, err
	}
	idx := make([]int32, 0, len(offers)/4)
	for i := range offers {
		if f.Match(&offers[i]) {
			idx = append(idx, int32(i))
		}
	}
	n := len(idx)
	if maxResults > 0 {
		n = min(n, maxResults)
	}
	if q.Limit > 0 {
		n = min(n, q.Limit)
	}
	if keys := compileOrder(q.Order); len(keys) > 0 {
		best := bestK(len(idx), n, func(a, b int32) int { return compareBy(keys, &offers[idx[a]], &offers[idx[b]]) })
		for i, j := range best[:n] {
			best[i] = idx[j]
		}
		idx = best
	}
	out := make([]Offer, n)
	for i := range out {
		out[i] = offers[idx[i]]
	}
	return out, nil
}

// OrderFunc compares two offers by a query's order keys (nil when the order
// names no known field); ties compare equal.
func OrderFunc(order [][2]string) func(a, b *Offer) int {
	keys := compileOrder(order)
	if len(keys) == 0 {
		return nil
	}
	return func(a, b *Offer) int { return compareBy(keys, a, b) }
}
