package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vastfleet/vastfleet/internal/flagrange"
)

// bounds is one flag's accepted range, in the flag's own syntax ("0",
// "1e6", "720h"). A lower bound written ">0" excludes 0. An empty bound is
// open.
type bounds struct {
	flag, lo, hi string
}

// limitFlags declares the accepted ranges of numeric flags in fs; call it
// right after the flags are defined (TestEveryNumericFlagHasARange walks
// the whole tree).
func limitFlags(fs *pflag.FlagSet, bs ...bounds) {
	for _, b := range bs {
		flagrange.Limit(fs, b.flag, b.lo, b.hi)
	}
}

// validateFlags checks every numeric flag the user set on cmd (its own and
// inherited) before any command does anything: a usage error (exit 2).
func validateFlags(cmd *cobra.Command) error {
	if err := flagrange.Check(cmd.Flags()); err != nil {
		return usageError{err}
	}
	return nil
}
