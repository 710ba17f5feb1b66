package plan

import (
	"fmt"
	"io"
	"strconv"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
)

// WriteText writes what req needs and res's options as plan and a
// planned up print them; explain adds the reason behind each requirement.
func WriteText(w io.Writer, req Req, res Result, explain bool) {
	fmt.Fprintf(w, "Needs: %.1f GB VRAM on %d GPU(s), ~%.1f h on one RTX 3090 (incl. 30%% overhead), %.0f GB disk, CUDA >= %.1f\n",
		req.VRAMGB, req.NumGPUs, req.Hours, req.DiskGB, req.CUDA)
	if explain {
		for _, r := range req.Reasons {
			fmt.Fprintf(w, "  - %s\n", r)
		}
	}
	fmt.Fprintln(w)
	t := cmdutil.NewTable(w, "#", "GPU", "VRAM", "$/hr", "Est.hours", "Est.total", "Reliability", "OfferID", "")
	for _, o := range res.Options {
		t.Row(strconv.Itoa(o.Rank), fmt.Sprintf("%dx %s", o.NumGPUs, o.GPUName), cmdutil.GB(o.Offer.GPURAM),
			fmt.Sprintf("%.3f", o.DPHTotal), fmt.Sprintf("%.2f", o.EstHours), fmt.Sprintf("$%.2f", o.EstTotal),
			fmt.Sprintf("%.3f", o.Reliability), strconv.FormatInt(o.OfferID, 10), o.Label)
	}
	t.Flush()
	for _, o := range res.Options {
		for _, warn := range o.Warnings {
			fmt.Fprintf(w, "option %d: %s\n", o.Rank, warn)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
