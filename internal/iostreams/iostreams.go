// Package iostreams is how commands reach the terminal: the process's
// streams, whether a person is watching each, and the environment, so
// that tests inject buffers and variables (as gh's pkg/iostreams).
package iostreams

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

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
		OutTTY: IsTerminal(os.Stdout),
		ErrTTY: IsTerminal(os.Stderr),
		InTTY:  IsTerminal(os.Stdin),
		Getenv: os.Getenv,
	}
}

// IsTerminal says whether w (or r) is a terminal a person reads.
func IsTerminal(w any) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// Confirm asks a yes/no question; without a terminal the answer is no.
func (s *IOStreams) Confirm(question string) bool {
	if !s.InTTY {
		return false
	}
	fmt.Fprintf(s.ErrOut, "%s [y/N] ", question)
	var answer string
	fmt.Fscanln(s.In, &answer)
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}

// Pick asks which of n options to take: 1 to n, or 0 for none (Enter, or
// an answer out of range).
func (s *IOStreams) Pick(n int) int {
	fmt.Fprintf(s.ErrOut, "Rent which option? [1-%d, Enter for none] ", n)
	var answer string
	fmt.Fscanln(s.In, &answer)
	k, err := strconv.Atoi(strings.TrimSpace(answer))
	if err != nil || k < 1 || k > n {
		return 0
	}
	return k
}
