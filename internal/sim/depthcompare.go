package sim

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DepthComparison is one seed's sum over the top N, beside the published one.
type DepthComparison struct {
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

// DepthHeader names the columns of DepthComparison.Cells.
var DepthHeader = []string{"SEED", "TOP", "VCPU", "PUBLISHED", "DEV", "RAM GB", "PUBLISHED", "DEV", "$/HR", "PUBLISHED", "DEV"}

// Cells is the comparison as sim depth's table shows it.
func (r DepthComparison) Cells() []string {
	return []string{strconv.FormatInt(r.Seed, 10), strconv.Itoa(r.N),
		fmt.Sprintf("%.0f", r.VCPU), fmt.Sprintf("%.0f", r.PubVCPU), fmt.Sprintf("%+.0f%%", r.VCPUDevPct),
		fmt.Sprintf("%.0f", r.RAMGB), fmt.Sprintf("%.0f", r.PubRAMGB), fmt.Sprintf("%+.0f%%", r.RAMGBDevPct),
		fmt.Sprintf("%.2f", r.DPH), fmt.Sprintf("%.2f", r.PubDPH), fmt.Sprintf("%+.0f%%", r.DPHDevPct)}
}

// ParseSeeds reads "1-5" (at most 1,000 seeds) or "1,3,7"; false when s
// is neither.
func ParseSeeds(s string) ([]int64, bool) {
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		a, err1 := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
		b, err2 := strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
		if err1 != nil || err2 != nil || b < a || b-a >= 1000 {
			return nil, false
		}
		var out []int64
		for x := a; x <= b; x++ {
			out = append(out, x)
		}
		return out, true
	}
	var out []int64
	for _, p := range strings.Split(s, ",") {
		x, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil {
			return nil, false
		}
		out = append(out, x)
	}
	return out, true
}

// CompareDepth is each seed's market of offers offers, ranked as
// PublishedDepth was, beside it: one row per seed and published depth,
// with the deviation of each sum in percent (one decimal).
func CompareDepth(ctx context.Context, seeds []int64, offers int) ([]DepthComparison, error) {
	var ns []int
	for _, w := range PublishedDepth {
		ns = append(ns, w.N)
	}
	dev := func(got, want float64) float64 { return math.Round(1000*(got/want-1)) / 10 }
	var rows []DepthComparison
	for _, seed := range seeds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i, r := range Depth(GenerateOffers(seed, offers), ns...) {
			w := PublishedDepth[i]
			rows = append(rows, DepthComparison{Seed: seed, N: r.N, VCPU: r.VCPU, RAMGB: math.Round(r.RAMGB), DPH: math.Round(r.DPH*1000) / 1000,
				PubVCPU: w.VCPU, PubRAMGB: w.RAMGB, PubDPH: w.DPH,
				VCPUDevPct: dev(r.VCPU, w.VCPU), RAMGBDevPct: dev(r.RAMGB, w.RAMGB), DPHDevPct: dev(r.DPH, w.DPH)})
		}
	}
	return rows, nil
}

// WorstDeviation is the largest deviation in rows, in percent.
func WorstDeviation(rows []DepthComparison) float64 {
	worst := 0.0
	for _, r := range rows {
		worst = math.Max(worst, math.Max(math.Abs(r.VCPUDevPct), math.Max(math.Abs(r.RAMGBDevPct), math.Abs(r.DPHDevPct))))
	}
	return worst
}
