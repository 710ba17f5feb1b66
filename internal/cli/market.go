package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/depthplot"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/market"
)

type depthOptions struct {
	Query []string // the query's words, as given
	query queryFlags
	rank  rankFlags
	Tops  []int
	Plot  string
	cmdutil.JSONFlags
}

func newMarketCmd(f *factory.Factory, depthF func(context.Context, *depthOptions) error) *cobra.Command {
	cmd := &cobra.Command{Use: "market", Short: "Market-wide views of the offers"}
	opts := &depthOptions{}
	depth := &cobra.Command{
		Use:   "depth [flags] QUERY...",
		Short: "How much capacity the top N offers give: vCPU, RAM and $/hr, cumulative",
		Long: `Collect every offer matching QUERY (sweeping past the per-search cap), rank
them (--by vcpu by default) and print what the top 10/30/50/100/200/300 would
give together. --plot writes the same curve as an SVG or PNG image.`,
		Example: `  vastfleet market depth -n 'rentable=True inet_up>=200 inet_down>=200 cpu_cores_effective>16 geolocation notin [CN,HK] dph_total<=5' --plot depth.svg`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Query = args
			return run(cmd, f, opts, depthF, depthRun)
		},
	}
	opts.query.register(depth)
	opts.rank.register(depth, "vcpu")
	depth.Flags().IntSliceVar(&opts.Tops, "top", []int{10, 30, 50, 100, 200, 300}, "cumulative rows to print")
	depth.Flags().StringVar(&opts.Plot, "plot", "", "write the depth curve to FILE (.svg or .png)")
	cmdutil.AddJSONFlags(depth.Flags(), &opts.JSONFlags, "print the rows as JSON")
	cmd.AddCommand(depth)
	return cmd
}

func depthRun(ctx context.Context, f *factory.Factory, opts *depthOptions) error {
	if opts.Plot != "" {
		if err := depthplot.CheckName(opts.Plot); err != nil {
			return usageError{err}
		}
	}
	for _, n := range opts.Tops {
		if n <= 0 {
			return usagef("--top %d: every row must be a positive count", n)
		}
	}
	ranked, s, err := rankedOffers(ctx, f, &opts.query, &opts.rank, opts.Query, opts.query.SweepLimit)
	if err != nil {
		return err
	}
	rows := market.DepthTable(ranked, opts.Tops)
	if opts.Plot != "" {
		if err := depthplot.WriteTable(opts.Plot, ranked, opts.Tops, s.Name()); err != nil {
			return err
		}
		fmt.Fprintf(f.IO.ErrOut, "wrote %s\n", opts.Plot)
	}
	err = cmdutil.PrintRows(f.IO.Out, opts.JSONFlags, rows, market.DepthHeader, market.Depth.Cells)
	if err == nil && !opts.JSON && len(ranked) < opts.Tops[len(opts.Tops)-1] {
		fmt.Fprintf(f.IO.ErrOut, "note: only %d offers match; rows past that repeat the total\n", len(ranked))
	}
	return err
}
