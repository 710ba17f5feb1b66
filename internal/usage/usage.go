// Package usage marks the errors that are the user's input (a flag value,
// an address, a file named), so that a domain package can say so and the
// command line reports them with exit code 2, as its own flag errors; and
// the outcome of a command that did part of what was asked (exit 3).
package usage

import (
	"errors"
	"fmt"
)

// Error is an error caused by what the user asked.
type Error struct{ Err error }

func (e Error) Error() string { return e.Err.Error() }
func (e Error) Unwrap() error { return e.Err }

// Errorf formats a usage error as fmt.Errorf does.
func Errorf(format string, args ...any) error { return Error{fmt.Errorf(format, args...)} }

// Partial marks a command that did part of what was asked (a launch short
// of its quorum, an operation that failed on some nodes): the command
// line exits 3 for it. Every Partial is ErrPartial (errors.Is).
type Partial struct{ Err error }

func (e Partial) Error() string        { return e.Err.Error() }
func (e Partial) Unwrap() error        { return e.Err }
func (e Partial) Is(target error) bool { return target == ErrPartial }

// ErrPartial is what every Partial is.
var ErrPartial = errors.New("partial")

// FanOut is the outcome of one operation (what) on total nodes, failed
// of which failed: nil when none did, Partial when some did, an error
// when all did.
func FanOut(what string, failed, total int) error {
	switch {
	case failed == 0:
		return nil
	case failed == total:
		return fmt.Errorf("%s failed on all %d nodes", what, failed)
	}
	return Partial{Err: fmt.Errorf("%s failed on %d of %d nodes", what, failed, total)}
}
