package bill

import (
	"fmt"
	"io"
	"strconv"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/fleet"
)

// Dollars is an amount as the reports show it: to the cent.
func Dollars(v float64) string { return fmt.Sprintf("$%.2f", v) }

// Dollars4 is an amount to a hundredth of a cent, as reconciling needs.
func Dollars4(v float64) string { return fmt.Sprintf("$%.4f", v) }

// Signed4 is a difference to a hundredth of a cent, with its sign.
func Signed4(v float64) string { return fmt.Sprintf("%+.4f", v) }

// OptDollars is an amount that may be unknown ("-").
func OptDollars(v *float64) string {
	if v == nil {
		return "-"
	}
	return Dollars(*v)
}

// CostColumns head the cost table's CostRows.
var CostColumns = []string{"INSTANCE", "FLEET", "RUNNING", "EXISTED", "COMPUTE", "STORAGE", "BANDWIDTH", "TOTAL", "ESTIMATE"}

// CostRows is the cost report as table rows: one per instance, then one
// per fleet, then the total. An estimated bandwidth is marked "~".
func CostRows(rep fleet.CostReport) [][]string {
	var rows [][]string
	for _, c := range rep.Instances {
		bw := Dollars(c.Bandwidth)
		if c.BandwidthEstimated {
			bw = "~" + bw
		}
		rows = append(rows, []string{strconv.FormatInt(c.InstanceID, 10), c.Fleet, c.Running.Round(1e9).String(), c.Existed.Round(1e9).String(),
			Dollars(c.Compute), Dollars(c.Storage), bw, Dollars(c.Total), OptDollars(c.Estimated)})
	}
	for _, fl := range rep.Fleets {
		rows = append(rows, []string{"FLEET", fl.Fleet, "", "", Dollars(fl.Compute), Dollars(fl.Storage), Dollars(fl.Bandwidth), Dollars(fl.Total), OptDollars(fl.Estimated)})
	}
	return append(rows, []string{"TOTAL", "", "", "", Dollars(rep.Compute), Dollars(rep.Storage), Dollars(rep.Bandwidth), Dollars(rep.Total), OptDollars(rep.Estimated)})
}

// ReconcileColumns head the reconciliation's Rows.
var ReconcileColumns = []string{"INSTANCE", "FLEET", "KIND", "LEDGER", "CHARGED", "DIFFERENCE", "WHY"}

// Rows is the reconciliation as table rows: one per line of each
// instance, then the instance's totals, then the grand total.
func (r Report) Rows() [][]string {
	var rows [][]string
	for _, in := range r.Instances {
		id, fl := strconv.FormatInt(in.ID, 10), in.Fleet
		if !in.Known {
			fl = "(unknown)"
		}
		for _, l := range in.Lines {
			why := l.Explanation
			if l.Detail != "" {
				why += ": " + l.Detail
			}
			rows = append(rows, []string{id, fl, l.Kind, Dollars4(l.Ledger), Dollars4(l.Charged), Signed4(l.Difference), why})
		}
		verdict := "agrees within a cent"
		if !in.Agrees {
			verdict = "differs"
		}
		rows = append(rows, []string{id, fl, "total", Dollars4(in.Ledger), Dollars4(in.Charged), Signed4(in.Difference), verdict})
	}
	return append(rows, []string{"TOTAL", "", "", Dollars4(r.Total.Ledger), Dollars4(r.Total.Charged), Signed4(r.Total.Difference),
		fmt.Sprintf("%d of %d instances differ by a cent or more", r.Disagree, len(r.Instances))})
}

// CostWithOrphans is what cost shows: the cost report, and the orphans
// that bill beside it.
type CostWithOrphans struct {
	fleet.CostReport
	Orphans []fleet.OrphanView `json:"orphans"`
}

// WriteText writes the cost table, then the orphans' section.
func (c CostWithOrphans) WriteText(w io.Writer) error {
	if err := cmdutil.WriteTable(w, CostColumns, CostRows(c.CostReport)); err != nil {
		return err
	}
	return fleet.WriteOrphans(w, c.Orphans)
}
