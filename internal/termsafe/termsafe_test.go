package termsafe

import "testing"

func TestLineAndText(t *testing.T) {
	for _, c := range []struct{ in, line, text string }{
		{"RTX 4090", "RTX 4090", "RTX 4090"},
		{"Ünïcode 東京", "Ünïcode 東京", "Ünïcode 東京"},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`, `\x1b]0;pwned\x07`},
		{"\x1b]52;c;cGF5bG9hZA==\x07", `\x1b]52;c;cGF5bG9hZA==\x07`, `\x1b]52;c;cGF5bG9hZA==\x07`},
		{"\x1b[2J", `\x1b[2J`, `\x1b[2J`},
		{"a\tb\nc", `a\tb\nc`, "a\tb\nc"},
		{"fake\rreal\r\n", `fake\rreal\r\n`, "fake\\rreal\r\n"},
		{"del\x7f", `del\x7f`, `del\x7f`},
		{"c1\u009b31m", `c1\u009b31m`, `c1\u009b31m`},
		{"bidi\u202eevil", `bidi\u202eevil`, `bidi\u202eevil`},
		{"bad\xffutf8", `bad\xffutf8`, `bad\xffutf8`},
	} {
		if got := Line(c.in); got != c.line {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
		}
		if got := Text(c.in); got != c.text {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
		}
	}
}
