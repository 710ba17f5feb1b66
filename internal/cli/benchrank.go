package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/benchrank"
	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/sim"
)

type benchRankOptions struct {
	Offers  int
	Pairs   int
	Recipe  string
	File    string
	Seconds float64
	cmdutil.JSONFlags
}

// newBenchRankCmd parses into benchRankOptions and hands them to runF
// (tests) or benchRankRun.
func newBenchRankCmd(f *factory.Factory, runF func(context.Context, *benchRankOptions) error) *cobra.Command {
	opts := &benchRankOptions{}
	cmd := &cobra.Command{
		Use:   "rank",
		Short: "Ranking speed against the plain Python recipe, side by side",
		Long: `Rank the same offers dump with vastfleet and with the Python recipe
(shared/bench/py_rank_baseline.py), alternating the two, and print medians:

  in-process   filter + score + sort of every offer (the recipe's rank())
  process      load + rank + print, as a user runs each: the top 20, and every
               match (both a table of every match of the same dump)
  simulator    vastfleet alone: searches/s for --limit 100 with each named query,
               and search --all --json (every match), its time and peak memory, on
               a simulated market (sim serve --offers sets machines: about 1.26
               offers each, so not the dump's size and no ratio)

The dump is generated with the recipe's --gen unless --file names one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, f, opts, runF, benchRankRun)
		},
	}
	cmd.Flags().IntVar(&opts.Offers, "offers", 100_000, "offers in the generated dump and the simulated market")
	cmd.Flags().IntVar(&opts.Pairs, "pairs", 5, "alternating runs of each side; medians are printed")
	cmd.Flags().StringVar(&opts.Recipe, "recipe", "", "the Python recipe (default: "+benchrank.RecipeFile+" here or in a parent directory)")
	cmd.Flags().StringVar(&opts.File, "file", "", "rank this offers JSON array instead of a generated one")
	cmd.Flags().Float64Var(&opts.Seconds, "seconds", 3, "how long to measure the simulator's search rate")
	limitFlags(cmd.Flags(), bounds{"offers", "1", "10000000"}, bounds{"pairs", "1", "1000"}, bounds{"seconds", ">0", "3600"})
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print the rows as JSON")
	return cmd
}

func benchRankRun(ctx context.Context, f *factory.Factory, opts *benchRankOptions) error {
	if opts.Offers < 1 || opts.Pairs < 1 || opts.Seconds <= 0 {
		return usagef("--offers, --pairs and --seconds must be positive")
	}
	recipe := opts.Recipe
	if recipe == "" {
		wd, _ := os.Getwd()
		r, err := benchrank.FindRecipe(wd)
		if err != nil {
			return usagef("%v", err)
		}
		recipe = r
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	res, err := benchrank.Run(ctx, benchrank.Config{Bin: self, Recipe: recipe, File: opts.File,
		Offers: opts.Offers, Pairs: opts.Pairs, Seconds: opts.Seconds, APIKey: sim.DefaultAPIKey, Log: f.IO.ErrOut})
	if err != nil {
		return err
	}
	if !opts.JSON {
		fmt.Fprintf(f.IO.Out, "%d offers, %d pairs, medians (the machine's load affects both sides alike)\n", res.Offers, opts.Pairs)
	}
	return cmdutil.PrintRows(f.IO.Out, opts.JSONFlags, res.Rows, benchrank.Header, benchrank.Row.Cells)
}
