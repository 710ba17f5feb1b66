package flagrange

import (
	"testing"

	"github.com/spf13/pflag"
)

func TestCheckNamesTheFlagAndItsRange(t *testing.T) {
	for _, c := range []struct{ val, lo, hi, want string }{
		{"NaN", "0", "1000", "--x NaN: want a finite number from 0 to 1000"},
		{"0", ">0", "1000000", "--x 0: want a finite number above 0 and at most 1000000"},
		{"-1", "0", "", "--x -1: want a finite number of at least 0"},
		{"5", "", "", ""},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.Float64("x", 0, "")
		if c.lo != "" || c.hi != "" {
			Limit(fs, "x", c.lo, c.hi)
		}
		if err := fs.Parse([]string{"--x", c.val}); err != nil {
			t.Fatal(err)
		}
		err := Check(fs)
		if got := ""; err != nil {
			got = err.Error()
			if got != c.want {
				t.Errorf("%s in [%s, %s]: %q, want %q", c.val, c.lo, c.hi, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%s in [%s, %s]: accepted, want %q", c.val, c.lo, c.hi, c.want)
		}
	}
}
