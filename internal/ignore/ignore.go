// Package ignore matches paths against .gitignore-syntax rules: globs
// (* ? [...]), ** across directories, ! negation, a trailing / for
// directories only, and a leading or inner / anchoring a pattern to the
// directory of the file that holds it. The last rule that matches a path
// decides. It is stdlib only: the rules git documents in gitignore(5)
// are small, and none of the Go ports is both maintained and
// dependency-free.
package ignore

import (
	"path"
	"strings"
)

// Rule is one pattern line.
type Rule struct {
	base    string   // the directory the rule applies under ("" for the root), slash-separated
	segs    []string // pattern split on /, "**" standing for any number of directories
	negate  bool
	dirOnly bool
}

// Parse reads the rules of one ignore file held in directory base
// (relative to the tree's root, slash-separated, "" for the root).
func Parse(base, text string) []Rule {
	var rules []Rule
	for _, line := range strings.Split(text, "\n") {
		if r, ok := ParseLine(base, line); ok {
			rules = append(rules, r)
		}
	}
	return rules
}

// ParseLine reads one pattern; ok is false for blank lines and comments.
func ParseLine(base, line string) (Rule, bool) {
	line = strings.TrimSuffix(line, "\r")
	line = trimTrailingSpaces(line)
	if line == "" || line[0] == '#' {
		return Rule{}, false
	}
	r := Rule{base: strings.Trim(base, "/")}
	switch {
	case line[0] == '!':
		r.negate = true
		line = line[1:]
	case strings.HasPrefix(line, `\!`), strings.HasPrefix(line, `\#`):
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		r.dirOnly = true
		line = strings.TrimRight(line, "/")
	}
	if line == "" {
		return Rule{}, false
	}
	// A slash at the start or in the middle anchors the pattern to base;
	// without one it matches a name at any depth.
	anchored := strings.Contains(line, "/")
	line = strings.TrimPrefix(line, "/")
	if line == "" {
		return Rule{}, false
	}
	r.segs = strings.Split(line, "/")
	if !anchored {
		r.segs = append([]string{"**"}, r.segs...)
	}
	// Empty segments (a//b) are dropped, as git collapses them.
	r.segs = dropEmpty(r.segs)
	return r, true
}

func dropEmpty(segs []string) []string {
	out := segs[:0]
	for _, s := range segs {
		// Runs of ** mean what one does, and would cost a power of the
		// path's depth to match.
		if s != "" && (s != "**" || len(out) == 0 || out[len(out)-1] != "**") {
			out = append(out, s)
		}
	}
	return out
}

// trimTrailingSpaces drops unescaped trailing spaces, as git does.
func trimTrailingSpaces(s string) string {
	for strings.HasSuffix(s, " ") && !strings.HasSuffix(s, `\ `) {
		s = s[:len(s)-1]
	}
	if strings.HasSuffix(s, `\ `) {
		s = s[:len(s)-2] + " "
	}
	return s
}

// Negated reports whether the rule re-includes what it matches.
func (r Rule) Negated() bool { return r.negate }

// Match reports whether the rule matches rel (slash-separated, relative
// to the tree's root); isDir says whether rel is a directory.
func (r Rule) Match(rel string, isDir bool) bool {
	if r.dirOnly && !isDir {
		return false
	}
	if r.base != "" {
		if !strings.HasPrefix(rel, r.base+"/") {
			return false
		}
		rel = rel[len(r.base)+1:]
	}
	if rel == "" {
		return false
	}
	return matchSegs(r.segs, strings.Split(rel, "/"))
}

func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			if len(rest) == 0 {
				// A trailing ** matches everything inside, but not the
				// directory itself (dir/** leaves dir).
				return len(name) > 0
			}
			for i := 0; i <= len(name); i++ {
				if matchSegs(rest, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// Decide applies rules, last match first: matched is false when no rule
// matches rel; otherwise ignored says whether the last match excludes it.
func Decide(rules []Rule, rel string, isDir bool) (ignored, matched bool) {
	for i := len(rules) - 1; i >= 0; i-- {
		if rules[i].Match(rel, isDir) {
			return !rules[i].negate, true
		}
	}
	return false, false
}
