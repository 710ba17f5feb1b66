package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// WriteJSON writes v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Table writes aligned columns for a person at a terminal and plain
// tab-separated lines otherwise (a pipe, a file: `cut -f2`, awk -F'\t'),
// as gh does; the first row is the header either way.
type Table struct {
	tw *tabwriter.Writer
	w  io.Writer // set when the output is not a terminal: no alignment
}

// NewTable starts a table on w with its header row.
func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{}
	if iostreams.IsTerminal(w) {
		t.tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	} else {
		t.w = w
	}
	t.Row(header...)
	return t
}

// Row writes one row; every cell goes through termsafe.Line, as cells
// carry marketplace and imported strings (labels, GPU names, reasons).
func (t *Table) Row(cells ...string) {
	safe := make([]string, len(cells))
	for i, c := range cells {
		safe[i] = termsafe.Line(c)
	}
	if t.tw == nil {
		fmt.Fprintln(t.w, strings.Join(safe, "\t"))
		return
	}
	fmt.Fprintln(t.tw, strings.Join(safe, "\t"))
}

// Flush writes out the aligned rows.
func (t *Table) Flush() error {
	if t.tw == nil {
		return nil
	}
	return t.tw.Flush()
}

// PrintRows is what a reporting command prints of its rows: JSON with
// --json (through --jq), else a table under header, cells giving each
// row's cells in the header's order. The JSON is rows as given (nil rows
// are null: a command that promises [] passes an empty slice).
func PrintRows[T any](w io.Writer, js JSONFlags, rows []T, header []string, cells func(T) []string) error {
	if js.JSON {
		return WriteJSON(js.Out(w), rows)
	}
	t := NewTable(w, header...)
	for _, r := range rows {
		t.Row(cells(r)...)
	}
	return t.Flush()
}
