package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/market"
)

// printOffers writes the offer table a person reads at a glance; data lines
// start with the offer id, and a TOTAL row sums the fleet it would make.
func printOffers(w io.Writer, ranked []market.Ranked) error {
	t := cmdutil.NewTable(w, "ID", "SCORE", "vCPUs", "RAM", "$/hr", "N", "MODEL", "LOCATION", "RELIABILITY")
	var vcpu, ram, dph float64
	var gpus int
	for _, r := range ranked {
		o := r.Offer
		t.Row(strconv.FormatInt(o.ID, 10), fmtScore(r.Score), fmtNum(o.CPUCoresEffective), fmtGB(o.CPURAM),
			fmt.Sprintf("%.3f", o.DPHTotal), strconv.Itoa(o.NumGPUs), o.GPUName, o.Geolocation,
			fmt.Sprintf("%.3f", o.Reliability))
		vcpu += o.CPUCoresEffective
		ram += o.CPURAM
		dph += o.DPHTotal
		gpus += o.NumGPUs
	}
	t.Row("TOTAL", fmt.Sprintf("%d offers", len(ranked)), fmtNum(vcpu), fmtGB(ram), fmt.Sprintf("%.3f", dph), strconv.Itoa(gpus), "", "", "")
	return t.Flush()
}

func fmtScore(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.4f", v)
	}
}

func fmtNum(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return fmt.Sprintf("%.1f", v)
}

// fmtGB shows a marketplace MB figure in GB, as the vastai CLI does (÷1000).
func fmtGB(mb float64) string { return fmt.Sprintf("%.0f GB", mb/1000) }
