package ignore

import "testing"

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules string
		base  string
		path  string
		dir   bool
		want  bool // ignored
	}{
		{"name at any depth", "*.log", "", "a/b/x.log", false, true},
		{"name at the root", "*.log", "", "x.log", false, true},
		{"no match", "*.log", "", "x.txt", false, false},
		{"star stays in a segment", "a*c", "", "ab/c", false, false},
		{"comment", "# *.log", "", "x.log", false, false},
		{"escaped hash", `\#x`, "", "#x", false, true},
		{"negation re-includes", "*.log\n!keep.log", "", "keep.log", false, false},
		{"negation then exclude again", "*.log\n!keep.log\nkeep.log", "", "keep.log", false, true},
		{"escaped bang", `\!x`, "", "!x", false, true},
		{"dir only skips files", "build/", "", "build", false, false},
		{"dir only matches dirs", "build/", "", "src/build", true, true},
		{"anchored at root", "/build", "", "build", true, true},
		{"anchored not deeper", "/build", "", "src/build", true, false},
		{"inner slash anchors", "doc/*.txt", "", "doc/a.txt", false, true},
		{"inner slash anchors, not deeper", "doc/*.txt", "", "x/doc/a.txt", false, false},
		{"inner slash, star not across dirs", "doc/*.txt", "", "doc/sub/a.txt", false, false},
		{"leading ** any depth", "**/foo", "", "a/b/foo", false, true},
		{"leading ** at root", "**/foo", "", "foo", false, true},
		{"leading ** then dir", "**/foo/bar", "", "x/foo/bar", false, true},
		{"trailing ** inside", "abc/**", "", "abc/x/y", false, true},
		{"trailing ** not the dir", "abc/**", "", "abc", true, false},
		{"middle ** zero dirs", "a/**/b", "", "a/b", false, true},
		{"middle ** many dirs", "a/**/b", "", "a/x/y/b", false, true},
		{"middle ** needs b", "a/**/b", "", "a/x/y/c", false, false},
		{"question mark", "file?.py", "", "file1.py", false, true},
		{"class", "*.py[co]", "", "m.pyc", false, true},
		{"class miss", "*.py[co]", "", "m.py", false, false},
		{"trailing spaces trimmed", "x.log   ", "", "x.log", false, true},
		{"escaped trailing space kept", `x\ `, "", "x ", false, true},
		{"CRLF", "x.log\r\n", "", "x.log", false, true},
		{"nested file applies below", "*.tmp", "sub", "sub/a/x.tmp", false, true},
		{"nested file not outside", "*.tmp", "sub", "other/x.tmp", false, false},
		{"nested anchored", "/out", "sub", "sub/out", true, true},
		{"nested anchored not deeper", "/out", "sub", "sub/a/out", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := Decide(Parse(tc.base, tc.rules), tc.path, tc.dir)
			if got != tc.want {
				t.Errorf("rules %q (in %q) on %q (dir %v): ignored %v, want %v", tc.rules, tc.base, tc.path, tc.dir, got, tc.want)
			}
		})
	}
}

func TestDecideNoMatch(t *testing.T) {
	if _, matched := Decide(Parse("", "*.log\n!x.log"), "a.txt", false); matched {
		t.Error("no rule should match a.txt")
	}
	if ignored, matched := Decide(Parse("", "*.log\n!x.log"), "x.log", false); ignored || !matched {
		t.Errorf("x.log: ignored %v matched %v, want re-included by a match", ignored, matched)
	}
}

func FuzzParseAndMatch(f *testing.F) {
	for _, s := range []string{"*.log", "!a/**/b/", "/x\\ ", "[a-", "**", "a//b", "\\!#"} {
		f.Add(s, "a/b/c.log", true)
	}
	f.Fuzz(func(t *testing.T, rules, rel string, dir bool) {
		Decide(Parse("", rules), rel, dir)
		Decide(Parse("a", rules), rel, dir)
	})
}
