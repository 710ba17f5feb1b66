package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/jsonarray"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// simDepthOptions is what `sim depth` was asked.
type simDepthOptions struct {
	Seeds  string
	Offers int
	cmdutil.JSONFlags
	seeds []int64
}

func newSimDepthCmd(f *factory.Factory, runF func(context.Context, *simDepthOptions) error) *cobra.Command {
	opts := &simDepthOptions{}
	cmd := &cobra.Command{
		Use:   "depth",
		Short: "The simulated market's depth beside the published table (market-facts.md), per seed",
		Long: `Rank each seed's default simulated market as the published depth table was
ranked (rentable, inet_up and inet_down >= 200 Mb/s, more than 16 effective
cores, CN and HK excluded, dph_total <= 5; by vCPUs per $/hr) and print the
sums over the top 10, 30, 50, 100, 200 and 300 offers beside the published
ones, with the deviation of each in percent.`,
		Example: `  vastfleet sim depth --seeds 1-5`,
		RunE: func(cmd *cobra.Command, args []string) error {
			seeds, ok := sim.ParseSeeds(opts.Seeds)
			if !ok {
				return usagef("--seeds %q: give a range like 1-5 or a list like 1,3,7", opts.Seeds)
			}
			opts.seeds = seeds
			return run(cmd, f, opts, runF, simDepthRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Seeds, "seeds", "1-5", "market seeds: a range 1-5 or a list 1,3,7")
	fl.IntVar(&opts.Offers, "offers", sim.DefaultOffers, "offers in each market")
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print JSON")
	limitFlags(fl, bounds{"offers", "1", "1000000"})
	return cmd
}

func simDepthRun(ctx context.Context, f *factory.Factory, opts *simDepthOptions) error {
	rows, err := sim.CompareDepth(ctx, opts.seeds, opts.Offers)
	if err != nil {
		return err
	}
	if opts.JSON {
		return jsonarray.Write(opts.Out(f.IO.Out), rows)
	}
	if err := cmdutil.PrintRows(f.IO.Out, opts.JSONFlags, rows, sim.DepthHeader, sim.DepthComparison.Cells); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "largest deviation from the published table: %.1f%%\n", sim.WorstDeviation(rows))
	return nil
}
