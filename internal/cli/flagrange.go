package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// rangeAnnotation holds a numeric flag's accepted range on the flag itself,
// so the range lives with the command tree and validateFlags finds it
// wherever the flag is inherited.
const rangeAnnotation = "vastfleet/range"

// bounds is one flag's accepted range, in the flag's own syntax ("0",
// "1e6", "720h"). A lower bound written ">0" excludes 0. An empty bound is
// open.
type bounds struct {
	flag, lo, hi string
}

// limitFlags declares the accepted ranges of numeric flags in fs; call it
// right after the flags are defined. A name that is not a flag of fs is a
// programming error and panics, so a renamed flag cannot silently lose its
// range (TestEveryNumericFlagHasARange walks the whole tree).
func limitFlags(fs *pflag.FlagSet, bs ...bounds) {
	for _, b := range bs {
		if err := fs.SetAnnotation(b.flag, rangeAnnotation, []string{b.lo, b.hi}); err != nil {
			panic(fmt.Sprintf("limitFlags: %v", err))
		}
	}
}

// validateFlags checks every numeric flag the user set on cmd (its own and
// inherited): floats must be finite, and every value must lie in its
// declared range. It runs before any command does anything, so a NaN bid or
// a 1e308-hour plan never reaches the marketplace. The error names the flag
// and the range and is a usage error (exit 2).
func validateFlags(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err == nil && f.Changed {
			err = checkFlag(f)
		}
	})
	return err
}

func checkFlag(f *pflag.Flag) error {
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
	return usagef("--%s %s: want %s", f.Name, val, describeRange(kind, lo, hi))
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
