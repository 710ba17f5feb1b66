// Package usage marks the errors that are the user's input (a flag value,
// an address, a file named), so that a domain package can say so and the
// command line reports them with exit code 2, as its own flag errors; and
// the outcome of a command that did part of what was asked (exit 3).
package usage

import "fmt"

// Error is an error caused by what the user asked.
type Error struct{ Err error }

func (e Error) Error() string { return e.Err.Error() }
func (e Error) Unwrap() error { return e.Err }

// Errorf formats a usage error as fmt.Errorf does.
func Errorf(format string, args ...any) error { return Error{fmt.Errorf(format, args...)} }

// Partial marks a command that did part of what was asked (a launch short
// of its quorum, an operation that failed on some nodes): the command
// line exits 3 for it.
type Partial struct{ Err error }

func (e Partial) Error() string { return e.Err.Error() }
func (e Partial) Unwrap() error { return e.Err }
