package search

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/jsonarray"
	"github.com/vastfleet/vastfleet/internal/market"
)

// WriteOffers writes the offer table a person reads at a glance; data
// lines start with the offer id, and a TOTAL row sums the fleet it would
// make.
func WriteOffers(w io.Writer, ranked []market.Ranked) error {
	t := cmdutil.NewTable(w, "ID", "SCORE", "vCPUs", "RAM", "$/hr", "N", "MODEL", "LOCATION", "RELIABILITY")
	var vcpu, ram, dph float64
	var gpus int
	for _, r := range ranked {
		o := r.Offer
		t.Row(strconv.FormatInt(o.ID, 10), cmdutil.Score(r.Score), cmdutil.Num(o.CPUCoresEffective), cmdutil.GB(o.CPURAM),
			fmt.Sprintf("%.3f", o.DPHTotal), strconv.Itoa(o.NumGPUs), o.GPUName, o.Geolocation,
			fmt.Sprintf("%.3f", o.Reliability))
		vcpu += o.CPUCoresEffective
		ram += o.CPURAM
		dph += o.DPHTotal
		gpus += o.NumGPUs
	}
	t.Row("TOTAL", fmt.Sprintf("%d offers", len(ranked)), cmdutil.Num(vcpu), cmdutil.GB(ram), fmt.Sprintf("%.3f", dph), strconv.Itoa(gpus), "", "", "")
	return t.Flush()
}

// WriteExplain says what was asked of the marketplace (the request
// line and body sent) and why each offer ranks where it does.
func WriteExplain(w io.Writer, method, path string, body []byte, s market.Scorer, ranked []market.Ranked) {
	fmt.Fprintf(w, "\nquery sent (%s %s): %s\n", method, path, body)
	if s == nil {
		fmt.Fprintln(w, "order: the marketplace's own (no --by or --score)")
		return
	}
	fmt.Fprintf(w, "score: %s\n", s.Name())
	for _, r := range ranked {
		var parts []string
		for _, fc := range market.Explain(s, &r.Offer) {
			parts = append(parts, fmt.Sprintf("%s=%s", fc.Name, cmdutil.Score(fc.Value)))
		}
		fmt.Fprintf(w, "%d  %s  %s\n", r.ID, cmdutil.Score(r.Score), strings.Join(parts, " "))
	}
}

// Save writes a ranking as JSON to path, whole or not at all: the file
// search --from and launch --from read.
func Save(path string, ranked []market.Ranked) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return jsonarray.Write(w, ranked) })
}
