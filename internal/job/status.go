package job

import (
	"context"
	"sort"

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
	// UpRunning: an up process (foreground, detached or resumed) still
	// runs the job; a launching or running job without one was cut off
	// (`up --resume JOB` or `down JOB`).
	UpRunning bool `json:"up_running"`
}

// CutOff: the job was launching or running and no up runs it any more.
func (s Status) CutOff() bool {
	return !s.UpRunning && (s.State == StateLaunching || s.State == StateRunning)
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
		if cr, err := d.Fleet.Cost(ctx, rec.ID); err == nil {
			row.Spent = cr.Total
			for _, fc := range cr.Fleets {
				row.DPH += fc.DPH
			}
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Started > rows[j].Started })
	return rows, nil
}
