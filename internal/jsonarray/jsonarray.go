// Package jsonarray writes a long slice as indented JSON, one row at a
// time: a 100,000-offer answer (search --json, --save) never sits in
// memory twice.
package jsonarray

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// Write writes rows as a json.Encoder indented by two spaces writes the
// slice, byte for byte, one row at a time, so a 100,000-offer answer never sits in memory twice. Each row
// is encoded once, compact, and indented by hand: encoding/json's Indent
// re-validates every byte it reads, which cost as much as the encoding.
func Write[T any](w io.Writer, rows []T) error {
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
