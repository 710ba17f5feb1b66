package cli

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// termSafe neutralises a string from the marketplace or an imported file
// before it reaches a terminal: control characters (C0, DEL, C1), bidi
// overrides and invalid UTF-8 become visible escapes, so a label or offer
// field cannot move the cursor, clear the screen, retitle the window
// ("\x1b]0;...\x07") or reorder what the user reads. Tabs and newlines are
// escaped too: they would break a table's columns and rows. --json needs
// none of this; the encoder already escapes control characters.
func termSafe(s string) string {
	if isPlainASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
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

func isPlainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
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
