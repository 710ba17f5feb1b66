package cli

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/sim"
)

// simDepthOptions is what `sim depth` was asked.
type simDepthOptions struct {
	Seeds  string
	Offers int
	JSONFlags
	seeds []int64
}

// simDepthRow is one seed's sum over the top N, beside the published one.
type simDepthRow struct {
	Seed        int64   `json:"seed"`
	N           int     `json:"n"`
	VCPU        float64 `json:"vcpu"`
	RAMGB       float64 `json:"ram_gb"`
	DPH         float64 `json:"dph"`
	PubVCPU     float64 `json:"published_vcpu"`
	PubRAMGB    float64 `json:"published_ram_gb"`
	PubDPH      float64 `json:"published_dph"`
	VCPUDevPct  float64 `json:"vcpu_dev_pct"`
	RAMGBDevPct float64 `json:"ram_gb_dev_pct"`
	DPHDevPct   float64 `json:"dph_dev_pct"`
}

func newSimDepthCmd(f *factory, runF func(context.Context, *simDepthOptions) error) *cobra.Command {
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
			seeds, err := parseSeeds(opts.Seeds)
			if err != nil {
				return err
			}
			opts.seeds = seeds
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return simDepthRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Seeds, "seeds", "1-5", "market seeds: a range 1-5 or a list 1,3,7")
	fl.IntVar(&opts.Offers, "offers", sim.DefaultOffers, "offers in each market")
	addJSONFlags(fl, &opts.JSONFlags, "print JSON")
	limitFlags(fl, bounds{"offers", "1", "1000000"})
	return cmd
}

// parseSeeds reads "1-5" or "1,3,7".
func parseSeeds(s string) ([]int64, error) {
	bad := usagef("--seeds %q: give a range like 1-5 or a list like 1,3,7", s)
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		a, err1 := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
		b, err2 := strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
		if err1 != nil || err2 != nil || b < a || b-a >= 1000 {
			return nil, bad
		}
		var out []int64
		for x := a; x <= b; x++ {
			out = append(out, x)
		}
		return out, nil
	}
	var out []int64
	for _, p := range strings.Split(s, ",") {
		x, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil {
			return nil, bad
		}
		out = append(out, x)
	}
	return out, nil
}

func simDepthRun(ctx context.Context, f *factory, opts *simDepthOptions) error {
	var ns []int
	for _, w := range sim.PublishedDepth {
		ns = append(ns, w.N)
	}
	dev := func(got, want float64) float64 { return math.Round(1000*(got/want-1)) / 10 }
	var rows []simDepthRow
	for _, seed := range opts.seeds {
		if err := ctx.Err(); err != nil {
			return err
		}
		for i, r := range sim.Depth(sim.GenerateOffers(seed, opts.Offers), ns...) {
			w := sim.PublishedDepth[i]
			rows = append(rows, simDepthRow{Seed: seed, N: r.N, VCPU: r.VCPU, RAMGB: math.Round(r.RAMGB), DPH: math.Round(r.DPH*1000) / 1000,
				PubVCPU: w.VCPU, PubRAMGB: w.RAMGB, PubDPH: w.DPH,
				VCPUDevPct: dev(r.VCPU, w.VCPU), RAMGBDevPct: dev(r.RAMGB, w.RAMGB), DPHDevPct: dev(r.DPH, w.DPH)})
		}
	}
	if opts.JSON {
		return writeJSONArray(opts.out(f.io.Out), rows)
	}
	t := newTable(f.io.Out, "SEED", "TOP", "VCPU", "PUBLISHED", "DEV", "RAM GB", "PUBLISHED", "DEV", "$/HR", "PUBLISHED", "DEV")
	worst := 0.0
	for _, r := range rows {
		t.row(strconv.FormatInt(r.Seed, 10), strconv.Itoa(r.N),
			fmt.Sprintf("%.0f", r.VCPU), fmt.Sprintf("%.0f", r.PubVCPU), fmt.Sprintf("%+.0f%%", r.VCPUDevPct),
			fmt.Sprintf("%.0f", r.RAMGB), fmt.Sprintf("%.0f", r.PubRAMGB), fmt.Sprintf("%+.0f%%", r.RAMGBDevPct),
			fmt.Sprintf("%.2f", r.DPH), fmt.Sprintf("%.2f", r.PubDPH), fmt.Sprintf("%+.0f%%", r.DPHDevPct))
		worst = math.Max(worst, math.Max(math.Abs(r.VCPUDevPct), math.Max(math.Abs(r.RAMGBDevPct), math.Abs(r.DPHDevPct))))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(f.io.ErrOut, "largest deviation from the published table: %.1f%%\n", worst)
	return nil
}
