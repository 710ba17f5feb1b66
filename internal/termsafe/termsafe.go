// Package termsafe is the one rule for text that did not come from the
// user (a node's output, a log, a marketplace field, a file a node named)
// on its way to a terminal: control characters (C0 but tab and newline,
// DEL, C1), bidi overrides and invalid UTF-8 become visible escapes, so
// that such text cannot move the cursor, clear the screen, retitle the
// window ("\x1b]0;...\x07"), write to the clipboard (OSC 52) or reorder
// what the user reads. Plain UTF-8 passes unchanged. --json needs none of
// this: the encoder already escapes control characters.
package termsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Line is s for one cell or one line: tabs and newlines are escaped too,
// since they would break a table's columns and rows.
func Line(s string) string { return escape(s, false) }

// Text is s as lines of output (a command's output, a log): tabs and
// newlines are kept, and so is a carriage return that ends a line
// ("\r\n"); a lone one, which would let a line overwrite what the one
// before showed, is escaped.
func Text(s string) string { return escape(s, true) }

func escape(s string, text bool) string {
	if isPlain(s, text) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case text && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case text && r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			b.WriteByte('\r')
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0, isBidiControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isPlain reports printable ASCII (with tab and newline for text): the
// common case, returned as it is.
func isPlain(s string, text bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if text && (c == '\n' || c == '\t') {
			continue
		}
		if c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// isBidiControl reports the marks that reorder the text around them
// (U+202A–U+202E embeddings and overrides, U+2066–U+2069 isolates).
func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}
