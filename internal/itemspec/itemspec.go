// Package itemspec turns the --items (and task file items:) spec into the
// list of work items a fleet's item workers go through. It is pure apart
// from reading an items file, so that the CLI and `up` share one grammar.
//
// Three forms:
//
//	0..9999                 a range of integers, both ends included
//	lr=0.1,0.01;bs=32,64    a grid: the cartesian product of the
//	                        parameters, each item like "lr=0.1 bs=32"
//	                        (the first parameter varies slowest)
//	items.txt, @items.txt   a file, one item per line; blank lines are
//	                        skipped, spaces around a line trimmed. "@"
//	                        forces a file whose name looks like the above
//
// A value listed twice is one item (the coordinator keys items by value),
// so duplicates are dropped, keeping the first.
package itemspec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxItems bounds one spec: the items go into one SQLite transaction and,
// as a list, into memory.
const MaxItems = 1_000_000

// MaxItemLen is the longest item the coordinator takes: it goes into a
// shell command line.
const MaxItemLen = 4096

var rangeSpec = regexp.MustCompile(`^\s*(-?[0-9]+)\s*\.\.\s*(-?[0-9]+)\s*$`)

// FilePath is the file a spec names, and whether it names one (rather
// than a range or a grid), so a caller can resolve a relative path.
func FilePath(spec string) (string, bool) {
	switch {
	case strings.HasPrefix(spec, "@"):
		return spec[1:], true
	case rangeSpec.MatchString(spec), strings.Contains(spec, "="), strings.TrimSpace(spec) == "":
		return "", false
	}
	return spec, true
}

// ParseItems reads a spec in any of the three forms.
func ParseItems(spec string) ([]string, error) {
	switch {
	case strings.HasPrefix(spec, "@"):
		return readFile(spec[1:])
	case rangeSpec.MatchString(spec):
		return parseRange(spec)
	case strings.Contains(spec, "="):
		return parseGrid(spec)
	case strings.TrimSpace(spec) == "":
		return nil, errors.New("items: empty spec: want a file, a range like 0..9999 or a grid like lr=0.1,0.01;bs=32,64")
	}
	return readFile(spec)
}

func parseRange(spec string) ([]string, error) {
	m := rangeSpec.FindStringSubmatch(spec)
	lo, err1 := strconv.ParseInt(m[1], 10, 64)
	hi, err2 := strconv.ParseInt(m[2], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("items %q: the range's ends must be 64-bit integers", spec)
	}
	if lo > hi {
		return nil, fmt.Errorf("items %q: the range runs backwards; write %d..%d", spec, hi, lo)
	}
	if uint64(hi-lo) >= MaxItems {
		return nil, fmt.Errorf("items %q: %d items is more than %d", spec, uint64(hi-lo)+1, MaxItems)
	}
	out := make([]string, 0, hi-lo+1)
	for i := lo; ; i++ {
		out = append(out, strconv.FormatInt(i, 10))
		if i == hi {
			break
		}
	}
	return out, nil
}

type param struct {
	name   string
	values []string
}

func parseGrid(spec string) ([]string, error) {
	var params []param
	seen := map[string]bool{}
	total := 1
	for part := range strings.SplitSeq(spec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, list, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
			return nil, fmt.Errorf("items %q: %q: want name=value,value,… (a name without spaces)", spec, part)
		}
		if seen[name] {
			return nil, fmt.Errorf("items %q: parameter %s appears twice", spec, name)
		}
		seen[name] = true
		p := param{name: name}
		dup := map[string]bool{}
		for v := range strings.SplitSeq(list, ",") {
			v = strings.TrimSpace(v)
			if v == "" {
				return nil, fmt.Errorf("items %q: parameter %s has an empty value", spec, name)
			}
			if strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
				return nil, fmt.Errorf("items %q: value %q of %s contains a space: items are \"name=value name=value\", so values cannot", spec, v, name)
			}
			if !dup[v] {
				dup[v] = true
				p.values = append(p.values, v)
			}
		}
		total *= len(p.values)
		if total > MaxItems {
			return nil, fmt.Errorf("items %q: the grid has more than %d items", spec, MaxItems)
		}
		params = append(params, p)
	}
	if len(params) == 0 {
		return nil, fmt.Errorf("items %q: no parameters", spec)
	}
	out := make([]string, 0, total)
	idx := make([]int, len(params))
	var b strings.Builder
	for {
		b.Reset()
		for i, p := range params {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(p.name)
			b.WriteByte('=')
			b.WriteString(p.values[idx[i]])
		}
		out = append(out, b.String())
		// Odometer: the last parameter turns fastest.
		i := len(params) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(params[i].values) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return out, nil
		}
	}
}

func readFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("items: %w (want a file, a range like 0..9999 or a grid like lr=0.1,0.01;bs=32,64)", err)
	}
	out, err := parseLines(b)
	if err != nil {
		return nil, fmt.Errorf("items file %s: %w", path, err)
	}
	return out, nil
}

// parseLines is an items file's content as items.
func parseLines(b []byte) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	n := 0
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		n++
		v := strings.TrimSpace(string(line))
		if v == "" || seen[v] {
			continue
		}
		if !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return r != '\t' && !unicode.IsPrint(r) }) {
			return nil, fmt.Errorf("line %d contains a control character or is not UTF-8 text", n)
		}
		if len(v) > MaxItemLen {
			return nil, fmt.Errorf("line %d is longer than %d bytes", n, MaxItemLen)
		}
		if len(out) == MaxItems {
			return nil, fmt.Errorf("more than %d items", MaxItems)
		}
		seen[v] = true
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("no items (every line is blank)")
	}
	return out, nil
}
