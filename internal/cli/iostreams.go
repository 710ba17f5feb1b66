package cli

import (
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
