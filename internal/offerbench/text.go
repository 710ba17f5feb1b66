package offerbench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/termsafe"
	"github.com/vastfleet/vastfleet/internal/usage"
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

// ProbeJob runs a task file's probe (probe:) on one instance of each of
// the top machine types of ranked, a fleet of its own (name) destroyed at
// the end, its table on log, and gives the offers ordered by measured
// units per dollar (Rerank). A probe that passes nowhere stops the job:
// the benchmark is broken, or no machine runs it.
func ProbeJob(ctx context.Context, d Deps, ranked []market.Ranked, jf *jobfile.Job, name string, parallel int, log io.Writer) ([]market.Ranked, error) {
	p := jf.Probe
	top := cmp.Or(p.Top, DefaultTop)
	fmt.Fprintf(log, "probe: running %q on one instance of each of the top %d machine types (fleet %s)\n", p.Command, top, name)
	res, err := Run(ctx, d, ranked, Config{
		Probe: p.Command, Top: top, Timeout: p.Timeout, BootTimeout: launch.DefaultBootTimeout,
		Parallel: parallel, Fleet: name, Create: launch.Create(cmp.Or(jf.Image, launch.DefaultImage), cmp.Or(jf.Disk, launch.DefaultDisk)), Log: log,
	})
	if err != nil {
		return nil, err
	}
	if err := res.WriteText(log); err != nil {
		return nil, err
	}
	if len(res.Ranking) == 0 {
		return nil, usage.Errorf("probe: it passed on none of the %d machine types (see the table): fix the probe command, or remove probe:", len(res.Rows))
	}
	return Rerank(ranked, res), nil
}

// FleetName is the name of a probe fleet started at now.
func FleetName(now time.Time) string { return "probe-" + now.UTC().Format("20060102-150405") }

// Outcome is the run's exit: partial (exit 3) when some probes did not
// pass, an error (exit 1) when none did; the rows say which.
func (res Result) Outcome() error {
	return usage.FanOut("the probe", len(res.Rows)-len(res.Ranking), len(res.Rows))
}
