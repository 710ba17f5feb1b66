package market

import (
	"reflect"
	"slices"
	"strings"
	"unsafe"
)

// fastTerm is a compiled filter term over a plain Offer field read at its
// offset: no closure calls per offer, one switch. Only the common shapes
// (a number compared with a constant, a string equal to or in a set, the
// country in a set) have one; any other term leaves the filter on its
// closures. TestFastTermsMatchClosures holds the two to the same answers.
type fastTerm struct {
	kind fastKind
	op   fastOp
	off  uintptr
	v    float64
	s    string
	nums []float64
	strs []string
}

type fastKind uint8

const (
	fastF64 fastKind = iota + 1 // float64 field
	fastInt                     // int field, compared as float64
	fastI64                     // int64 field, compared as float64
	fastStr                     // string field
	fastGeo                     // geolocation by country or full string
)

type fastOp uint8

const (
	opEq fastOp = iota + 1
	opNeq
	opGt
	opGte
	opLt
	opLte
	opIn
	opNotin
)

var fastOps = map[string]fastOp{"eq": opEq, "neq": opNeq, "gt": opGt, "gte": opGte, "lt": opLt, "lte": opLte, "in": opIn, "notin": opNotin}

// plainField is where a json-named Offer field lives and how it reads.
type plainField struct {
	off  uintptr
	kind fastKind
}

// plainFields maps Offer json names to their offsets (float64, int, int64
// and string fields only).
var plainFields = func() map[string]plainField {
	m := map[string]plainField{}
	t := reflect.TypeFor[Offer]()
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		var k fastKind
		switch sf.Type.Kind() {
		case reflect.Float64:
			k = fastF64
		case reflect.Int:
			k = fastInt
		case reflect.Int64:
			k = fastI64
		case reflect.String:
			k = fastStr
		default:
			continue
		}
		m[name] = plainField{sf.Offset, k}
	}
	return m
}()

// fastTermFor returns the fast form of a term whose closure compileTerm
// built (col is the resolved column, scale its GB factor), if it has one.
func fastTermFor(name, col, op string, val any, scale float64) (fastTerm, bool) {
	fop, ok := fastOps[op]
	if !ok {
		return fastTerm{}, false
	}
	if name == "geolocation" {
		if fop != opEq && fop != opNeq && fop != opIn && fop != opNotin {
			return fastTerm{}, false
		}
		set, ok := strSet(val, fop)
		if !ok {
			return fastTerm{}, false
		}
		return fastTerm{kind: fastGeo, op: fop, strs: set}, true
	}
	pf, ok := plainFields[col]
	if !ok {
		return fastTerm{}, false
	}
	if pf.kind == fastStr {
		if fop != opEq && fop != opNeq && fop != opIn && fop != opNotin {
			return fastTerm{}, false
		}
		set, ok := strSet(val, fop)
		if !ok {
			return fastTerm{}, false
		}
		t := fastTerm{kind: fastStr, op: fop, off: pf.off, strs: set}
		if fop == opEq || fop == opNeq {
			t.s = set[0]
		}
		return t, true
	}
	t := fastTerm{kind: pf.kind, op: fop, off: pf.off}
	if fop == opIn || fop == opNotin {
		nums, err := valueList(val, scaledNum(false, scale))
		if err != nil {
			return fastTerm{}, false
		}
		t.nums = nums
		return t, true
	}
	if _, isList := listValues(val); isList {
		return fastTerm{}, false
	}
	v, ok, err := numValue(val, false)
	if err != nil || !ok {
		return fastTerm{}, false // null: the closure's constant answer
	}
	t.v = v * scale
	return t, true
}

// strSet is a string term's values; a single (eq, neq) value must be
// present, as null has its own closure.
func strSet(val any, op fastOp) ([]string, bool) {
	if op == opEq || op == opNeq {
		if _, isList := listValues(val); isList {
			return nil, false
		}
		s, ok, err := strValue(val)
		if err != nil || !ok {
			return nil, false
		}
		return []string{s}, true
	}
	set, err := strList(val)
	return set, err == nil
}

func (t *fastTerm) match(o *Offer) bool {
	p := unsafe.Pointer(o)
	var x float64
	switch t.kind {
	case fastF64:
		x = *(*float64)(unsafe.Add(p, t.off))
	case fastInt:
		x = float64(*(*int)(unsafe.Add(p, t.off)))
	case fastI64:
		x = float64(*(*int64)(unsafe.Add(p, t.off)))
	case fastStr:
		s := *(*string)(unsafe.Add(p, t.off))
		switch t.op {
		case opEq:
			return s == t.s
		case opNeq:
			return s != t.s
		case opIn:
			return slices.Contains(t.strs, s)
		default:
			return !slices.Contains(t.strs, s)
		}
	default: // fastGeo
		c := o.Country()
		hit := slices.Contains(t.strs, c) || slices.Contains(t.strs, o.Geolocation)
		return hit == (t.op == opEq || t.op == opIn)
	}
	switch t.op {
	case opEq:
		return x == t.v
	case opNeq:
		return x != t.v
	case opGt:
		return x > t.v
	case opGte:
		return x >= t.v
	case opLt:
		return x < t.v
	case opLte:
		return x <= t.v
	case opIn:
		return slices.Contains(t.nums, x)
	default:
		return !slices.Contains(t.nums, x)
	}
}
