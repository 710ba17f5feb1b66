// Package flagrange declares the accepted range of numeric command-line
// flags on the flags themselves and checks the values typed against it.
package flagrange

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// rangeAnnotation holds a numeric flag's accepted range on the flag itself,
// so the range lives with the command tree and Check finds it wherever
// the flag is inherited.
const rangeAnnotation = "vastfleet/range"

// Limit declares the accepted range of the numeric flag name in fs, in the
// flag's own syntax ("0", "1e6", "720h"); a lower bound written ">0"
// excludes 0, an empty bound is open. Call it right after the flag is
// defined. A name that is not a flag of fs is a programming error and
// panics, so a renamed flag cannot silently lose its range.
func Limit(fs *pflag.FlagSet, name, lo, hi string) {
	if err := fs.SetAnnotation(name, rangeAnnotation, []string{lo, hi}); err != nil {
		panic(fmt.Sprintf("flagrange.Limit: %v", err))
	}
}

// Check checks every numeric flag the user set in fs: floats must be
// finite, and every value must lie in its declared range, so a NaN bid or
// a 1e308-hour plan never reaches the marketplace. The error names the
// flag and the range; it is the user's input.
func Check(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err == nil && f.Changed {
			err = CheckFlag(f)
		}
	})
	return err
}

// Declared says whether f has a range declared with Limit.
func Declared(f *pflag.Flag) bool {
	_, ok := f.Annotations[rangeAnnotation]
	return ok
}

// Kind groups f's value type: "float", "int", "duration", or "" for a
// flag that is not a number.
func Kind(f *pflag.Flag) string { return numericKind(f.Value.Type()) }

// CheckFlag checks one flag's value, as Check does, whether or not the
// user set it.
func CheckFlag(f *pflag.Flag) error {
	kind := numericKind(f.Value.Type())
	if kind == "" {
		return nil
	}
	val := f.Value.String()
	lo, hi := "", ""
	if r := f.Annotations[rangeAnnotation]; len(r) == 2 {
		lo, hi = r[0], r[1]
	}
	x, err := parseNumber(kind, val)
	if err != nil {
		return fmt.Errorf("flag --%s: %w", f.Name, err) // unreachable: pflag parsed it already
	}
	bad := math.IsNaN(x) || math.IsInf(x, 0)
	open := strings.HasPrefix(lo, ">")
	if l := strings.TrimPrefix(lo, ">"); !bad && l != "" {
		min, err := parseNumber(kind, l)
		if err != nil {
			panic(fmt.Sprintf("flag --%s: bad lower bound %q", f.Name, lo))
		}
		bad = x < min || open && x == min
	}
	if !bad && hi != "" {
		max, err := parseNumber(kind, hi)
		if err != nil {
			panic(fmt.Sprintf("flag --%s: bad upper bound %q", f.Name, hi))
		}
		bad = x > max
	}
	if !bad {
		return nil
	}
	return fmt.Errorf("--%s %s: want %s", f.Name, val, describeRange(kind, lo, hi))
}

// numericKind groups pflag's value types: "float", "int", "duration" or ""
// for anything else.
func numericKind(typ string) string {
	switch typ {
	case "float64", "float32":
		return "float"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "int"
	case "duration":
		return "duration"
	}
	return ""
}

// parseNumber reads a value or bound as a float64 (durations in
// nanoseconds; every int flag here fits a float64's 53 bits where it
// matters, at the bounds).
func parseNumber(kind, s string) (float64, error) {
	if kind == "duration" {
		d, err := time.ParseDuration(s)
		return float64(d), err
	}
	return strconv.ParseFloat(s, 64)
}

func describeRange(kind, lo, hi string) string {
	what := map[string]string{"float": "a finite number", "int": "a whole number", "duration": "a duration"}[kind]
	open := strings.HasPrefix(lo, ">")
	lo = strings.TrimPrefix(lo, ">")
	switch {
	case lo == "" && hi == "":
		return what
	case lo == "":
		return fmt.Sprintf("%s of at most %s", what, hi)
	case hi == "" && open:
		return fmt.Sprintf("%s above %s", what, lo)
	case hi == "":
		return fmt.Sprintf("%s of at least %s", what, lo)
	case open:
		return fmt.Sprintf("%s above %s and at most %s", what, lo, hi)
	}
	return fmt.Sprintf("%s from %s to %s", what, lo, hi)
}
