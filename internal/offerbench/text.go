package offerbench

import (
	"fmt"
	"io"
	"strconv"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// WriteText writes the result as bench offers and a task file's probe
// print it: the rows, failed ones unranked, then how the listing's
// $/vCPU pick measured.
func (res Result) WriteText(w io.Writer) error {
	t := cmdutil.NewTable(w, "RANK", "OFFER", "MODEL", "CPU", "VCPU", "$/HR", "UNITS/S", "UNITS/$", "$/VCPU RANK", "STATUS")
	for _, r := range res.Rows {
		rank, ups, upd := "-", "-", "-"
		if r.Passed() {
			rank = strconv.Itoa(r.Rank)
			ups, upd = cmdutil.Score(r.UnitsPerS), cmdutil.Score(r.UnitsPerDollar)
		}
		status := r.Status
		if r.Error != "" {
			status += ": " + termsafe.Line(r.Error)
		}
		t.Row(rank, strconv.FormatInt(r.OfferID, 10), r.Model, r.CPU, strconv.FormatFloat(r.VCPU, 'g', 4, 64),
			fmt.Sprintf("%.4f", r.DPH), ups, upd, strconv.Itoa(r.ListingRank), status)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if res.ListingPickShare != nil {
		fmt.Fprintf(w, "the listing's $/vCPU pick (offer %d) measured %.0f%% of the best units per dollar\n", res.ListingPick, 100**res.ListingPickShare)
	} else {
		fmt.Fprintf(w, "the listing's $/vCPU pick (offer %d) has no measurement\n", res.ListingPick)
	}
	return nil
}
