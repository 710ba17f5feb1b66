package job

import (
	"context"
	"math"
	"sort"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/store"
)

// Status is a job as status shows it: its state, what of it still bills,
// and its spend as of the market's now (Deps.Fleet's clock).
type Status struct {
	ID        string  `json:"id"`
	State     string  `json:"state"`
	Started   string  `json:"started_at"`
	Live      int     `json:"instances_live"`
	DPH       float64 `json:"dph"`
	Spent     float64 `json:"spent"`
	Estimate  float64 `json:"estimate"`
	Dashboard string  `json:"dashboard,omitempty"`
	// MetricsPerDPH is each of the user's metrics, summed over the live
	// instances that reported it, per $/hr those instances cost: what the
	// fleet delivers per dollar. Reporting is how many live instances
	// have reported metrics.
	MetricsPerDPH map[string]float64 `json:"metrics_per_dph,omitempty"`
	Reporting     int                `json:"nodes_reporting"`
	// ItemsDone is the job's work items with a result, and ItemsPerDollar
	// those per dollar spent so far (0 without items or spend).
	ItemsDone      int     `json:"items_done"`
	ItemsPerDollar float64 `json:"items_per_dollar,omitempty"`
	// UpRunning: an up process (foreground, detached or resumed) still
	// runs the job; a launching or running job without one was cut off
	// (`up --resume JOB` or `down JOB`).
	UpRunning bool `json:"up_running"`
}

// CutOff: the job was launching or running and no up runs it any more.
func (s Status) CutOff() bool {
	return !s.UpRunning && (s.State == StateLaunching || s.State == StateRunning)
}

// perDPH sums each metric over the live instances that reported it and
// divides by what those instances cost an hour.
func perDPH(live []store.Instance, reports map[int64]coord.Reported) (map[string]float64, int) {
	sum, cost := map[string]float64{}, map[string]float64{}
	reporting := 0
	for _, in := range live {
		r, ok := reports[in.ID]
		if !ok || in.DPHTotal <= 0 {
			continue
		}
		reporting++
		for k, v := range r.Metrics {
			sum[k] += v
			cost[k] += in.DPHTotal
		}
	}
	if reporting == 0 {
		return nil, 0
	}
	out := make(map[string]float64, len(sum))
	for k, v := range sum {
		out[k] = math.Round(v/cost[k]*1000) / 1000
	}
	return out, reporting
}

// Statuses are the jobs' statuses, newest first; upRunning says whether
// an up process still runs a job.
func Statuses(ctx context.Context, d *Deps, recs []*Record, upRunning func(id string) bool) ([]Status, error) {
	rows := []Status{}
	for _, rec := range recs {
		row := Status{ID: rec.ID, State: rec.State, Started: rec.StartedAt.Format("2006-01-02 15:04:05"), Estimate: rec.Estimate,
			Dashboard: rec.Dashboard, UpRunning: upRunning(rec.ID)}
		live, err := d.Store.Instances(ctx, store.InstanceFilter{Fleet: rec.ID})
		if err != nil {
			return nil, err
		}
		row.Live = len(live)
		if d.Results != nil {
			reports, err := d.Results.LastMetrics(ctx, rec.ID)
			if err != nil {
				return nil, err
			}
			row.MetricsPerDPH, row.Reporting = perDPH(live, reports)
			if _, _, done, err := d.Results.ItemCounts(ctx, rec.ID); err == nil {
				row.ItemsDone = done
			}
		}
		if cr, err := d.Fleet.Cost(ctx, rec.ID); err == nil {
			row.Spent = cr.Total
			for _, fc := range cr.Fleets {
				row.DPH += fc.DPH
			}
		}
		if row.ItemsDone > 0 && row.Spent > 0 {
			row.ItemsPerDollar = math.Round(float64(row.ItemsDone)/row.Spent*10) / 10
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Started > rows[j].Started })
	return rows, nil
}
