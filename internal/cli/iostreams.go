package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"
)

// IOStreams is how commands reach the terminal; tests inject buffers.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// OutTTY and ErrTTY say whether a person is watching: tables and
	// progress for people, plain lines otherwise.
	OutTTY bool
	ErrTTY bool
	InTTY  bool
	Getenv func(string) string
}

// System is the process's own streams.
func System() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		OutTTY: term.IsTerminal(int(os.Stdout.Fd())),
		ErrTTY: term.IsTerminal(int(os.Stderr.Fd())),
		InTTY:  term.IsTerminal(int(os.Stdin.Fd())),
		Getenv: os.Getenv,
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONArray writes rows as writeJSON would write the slice, one row at
// a time, so a 100,000-offer answer never sits in memory twice. Each row
// is encoded once, compact, and indented by hand: encoding/json's Indent
// re-validates every byte it reads, which cost as much as the encoding.
func writeJSONArray[T any](w io.Writer, rows []T) error {
	if len(rows) == 0 {
		_, err := io.WriteString(w, "[]\n")
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString("[\n")
	var compact bytes.Buffer
	enc := json.NewEncoder(&compact) // escapes as json.Marshal does
	var out []byte
	for i := range rows {
		compact.Reset()
		if err := enc.Encode(&rows[i]); err != nil {
			return err
		}
		b := bytes.TrimSuffix(compact.Bytes(), []byte("\n"))
		out = append(out[:0], "  "...)
		out = appendIndented(out, b, "  ", "  ")
		if i < len(rows)-1 {
			out = append(out, ",\n"...)
		} else {
			out = append(out, "\n]\n"...)
		}
		if _, err := bw.Write(out); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// appendIndented appends src, compact JSON as encoding/json writes it
// (no whitespace outside strings), indented as json.Indent(dst, src,
// prefix, indent) would: a newline, the prefix and one indent per level
// after each opening bracket and comma, a space after each colon, and
// empty objects and arrays kept as {} and [].
func appendIndented(dst, src []byte, prefix, indent string) []byte {
	depth := 0
	newline := func() {
		dst = append(dst, '\n')
		dst = append(dst, prefix...)
		for range depth {
			dst = append(dst, indent...)
		}
	}
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '"':
			end := stringEnd(src, i)
			dst = append(dst, src[i:end]...)
			i = end - 1
		case '{', '[':
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				dst = append(dst, c, src[i+1])
				i++
				continue
			}
			dst = append(dst, c)
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			dst = append(dst, c)
		case ',':
			dst = append(dst, ',')
			newline()
		case ':':
			dst = append(dst, ':', ' ')
		default:
			// A number or a literal: copy up to the next delimiter.
			j := i + 1
			for j < len(src) && !jsonDelim(src[j]) {
				j++
			}
			dst = append(dst, src[i:j]...)
			i = j - 1
		}
	}
	return dst
}

// stringEnd is the index just past the JSON string that opens at
// src[start] (its escapes skipped), or len(src) if it is cut short.
func stringEnd(src []byte, start int) int {
	j := start + 1
	for j < len(src) && src[j] != '"' {
		if src[j] == '\\' {
			j++
		}
		j++
	}
	return min(j+1, len(src))
}

func jsonDelim(c byte) bool {
	switch c {
	case ',', ':', '{', '}', '[', ']', '"':
		return true
	}
	return false
}

// table writes aligned columns for a person at a terminal and plain
// tab-separated lines otherwise (a pipe, a file: `cut -f2`, awk -F'\t'),
// as gh does; the first row is the header either way.
type table struct {
	tw *tabwriter.Writer
	w  io.Writer // set when the output is not a terminal: no alignment
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{}
	if isTerminal(w) {
		t.tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	} else {
		t.w = w
	}
	t.row(header...)
	return t
}

// isTerminal says whether w is a terminal a person reads.
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// row writes one row; every cell goes through termSafe, as cells carry
// marketplace and imported strings (labels, GPU names, reasons).
func (t *table) row(cells ...string) {
	safe := make([]string, len(cells))
	for i, c := range cells {
		safe[i] = termSafe(c)
	}
	if t.tw == nil {
		fmt.Fprintln(t.w, strings.Join(safe, "\t"))
		return
	}
	fmt.Fprintln(t.tw, strings.Join(safe, "\t"))
}

func (t *table) flush() error {
	if t.tw == nil {
		return nil
	}
	return t.tw.Flush()
}

// confirm asks a yes/no question; without a terminal the answer is no.
func confirm(io *IOStreams, question string) bool {
	if !io.InTTY {
		return false
	}
	fmt.Fprintf(io.ErrOut, "%s [y/N] ", question)
	var answer string
	fmt.Fscanln(io.In, &answer)
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}
