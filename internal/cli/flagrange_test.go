package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/flagrange"
	"github.com/vastfleet/vastfleet/internal/iostreams"
)

// TestBadNumericFlagsRefused is issue 9's list of bad inputs and more:
// every one exits 2 before anything is rented, and the message names the
// flag and the accepted range.
func TestBadNumericFlagsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"--bid", []string{"rent", "1", "--bid", "NaN"}},
		{"--bid", []string{"rent", "1", "--bid", "-0.5"}},
		{"--disk", []string{"rent", "1", "--disk", "Inf"}},
		{"--timeout", []string{"rent", "1", "--timeout", "-1m"}},
		{"--hours", []string{"plan", "--hours", "1e308", "--rent", "1", "--image", "x"}},
		{"--hours", []string{"plan", "--hours", "NaN"}},
		{"--rent", []string{"plan", "--hours", "1", "--rent", "4"}},
		{"--max-budget", []string{"plan", "--hours", "1", "--max-budget", "-Inf"}},
		{"--epochs", []string{"plan", "--epochs", "+Inf"}},
		{"--budget", []string{"launch", "--budget", "NaN", "--count", "2", "-n", launchQuery}},
		{"--budget", []string{"launch", "--budget", "Inf", "--count", "2", "-n", launchQuery}},
		{"--max-dph", []string{"launch", "--max-dph", "-1", "--count", "2", "-n", launchQuery}},
		{"--count", []string{"launch", "--count", "0", "-n", launchQuery}},
		{"--count", []string{"launch", "--count", "1001", "-n", launchQuery}},
		{"--deadline", []string{"launch", "--deadline", "-5m", "--count", "2", "-n", launchQuery}},
		{"--spare", []string{"launch", "--park", "--spare", "NaN", "--count", "2", "-n", launchQuery}},
		{"--rate", []string{"launch", "--rate", "Inf", "--count", "2", "-n", launchQuery}},
		{"--sim-speed", []string{"--sim-speed", "NaN", "ls"}},
		{"--sim-speed", []string{"--sim-speed", "0", "launch", "--count", "2", "-n", launchQuery}},
		{"--api-rate", []string{"--api-rate", "Inf", "ls"}},
		{"--storage", []string{"search", "--storage", "NaN"}},
		{"--limit", []string{"search", "--limit", "-3"}},
		{"--parallel", []string{"exec", "--all", "--parallel", "0", "true"}},
		{"--time-scale", []string{"sim", "serve", "--time-scale", "NaN"}},
		{"--stuck", []string{"sim", "serve", "--stuck", "2"}},
	} {
		r := e.run(c.args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)\nstderr: %s", c.args, r.code, r.err)
			continue
		}
		if !strings.HasPrefix(r.err, "error: "+c.flag+" ") || !strings.Contains(r.err, "want ") {
			t.Errorf("%v: stderr %q does not name %s and its range", c.args, r.err, c.flag)
		}
	}
	if ls := decode[[]map[string]any](t, e.ok("ls", "--json").out); len(ls) != 0 {
		t.Errorf("refused commands rented %d instance(s): %v", len(ls), ls)
	}
}

func TestFlagRangeMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for args, want := range map[string]string{
		"rent 1 --bid NaN":             "error: --bid NaN: want a finite number from 0 to 1000\n",
		"--sim-speed 0 ls":             "error: --sim-speed 0: want a finite number above 0 and at most 1000000\n",
		"launch --deadline -5m -n x>1": "error: --deadline -5m0s: want a duration from 0 to 720h\n",
		"launch --count 0 -n x>1":      "error: --count 0: want a whole number from 1 to 1000\n",
	} {
		if r := e.run(strings.Fields(args)...); r.err != want {
			t.Errorf("%s: stderr %q, want %q", args, r.err, want)
		}
	}
}

// TestEveryNumericFlagHasARange: a float or duration flag without a
// declared range would accept 1e308 or -720h unchecked; every one in the
// tree must have one, and every default must lie in it.
func TestEveryNumericFlagHasARange(t *testing.T) {
	t.Parallel()
	root := newRootCmd(factory.New(&iostreams.IOStreams{Getenv: func(string) string { return "" }}, Version))
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			kind := flagrange.Kind(f)
			if kind == "" {
				return
			}
			if !flagrange.Declared(f) && kind != "int" {
				t.Errorf("%s --%s (%s) has no declared range (limitFlags)", c.CommandPath(), f.Name, f.Value.Type())
			}
			f.Changed = true // check the default as if the user had typed it
			if err := flagrange.CheckFlag(f); err != nil {
				t.Errorf("%s: default out of range: %v", c.CommandPath(), err)
			}
			f.Changed = false
		}
		c.LocalFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
