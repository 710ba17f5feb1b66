package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vastfleet/vastfleet/internal/store"
)

// InstanceView is an instance as ls and rent show it (`ls --json`'s row):
// the marketplace's names where they exist (id, dph_total, ssh_url, ...)
// plus vastfleet's own.
type InstanceView struct {
	ID          int64    `json:"id"`
	OfferID     int64    `json:"offer_id"`
	MachineID   int64    `json:"machine_id"`
	GPUName     string   `json:"gpu_name"`
	NumGPUs     int      `json:"num_gpus"`
	CPUCores    float64  `json:"cpu_cores_effective"`
	RAMMB       float64  `json:"cpu_ram"`
	DPHTotal    float64  `json:"dph_total"`
	State       string   `json:"state"`
	Wanted      string   `json:"wanted"`
	CreatedAt   string   `json:"created_at"`
	UptimeSec   float64  `json:"uptime_seconds"`
	CostSoFar   float64  `json:"cost_so_far"`
	SSHURL      string   `json:"ssh_url"`
	Fleet       string   `json:"fleet"`
	Experiment  string   `json:"experiment"`
	Label       string   `json:"label"`
	EstHours    *float64 `json:"estimated_hours"`
	EstCost     *float64 `json:"estimated_cost"`
	Gone        bool     `json:"gone"`
	DestroyWait bool     `json:"destroy_requested"`
	// Note is the latest thing vastfleet did to the instance unasked
	// (reaped after its agent fell silent), with its time.
	Note string `json:"note,omitempty"`
	// Next is what the fleet's teardown ladder does to it next, and when.
	Next *Step `json:"next,omitempty"`
}

// InstanceViews prices each instance from its whole recorded timeline, the
// one cost rule `cost` uses too, with its latest note and its next
// teardown ladder step.
func (m *Manager) InstanceViews(ctx context.Context, recs []store.Instance, now time.Time) ([]InstanceView, error) {
	views := make([]InstanceView, 0, len(recs))
	ladders := map[string]Ladder{}
	for _, r := range recs {
		c, err := m.CostOf(ctx, r, now)
		if err != nil {
			return nil, err
		}
		v := instanceView(r, c.Total, now)
		l, ok := ladders[r.Fleet]
		if !ok && r.Fleet != "" {
			if l, err = FleetLadder(ctx, m.S, r.Fleet); err != nil {
				return nil, err
			}
			ladders[r.Fleet] = l
		}
		if st, err := m.NextStep(ctx, r, l); err != nil {
			return nil, err
		} else if st.Action != "" {
			v.Next = &st
		}
		notes, err := m.S.Notes(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		if len(notes) > 0 {
			n := notes[len(notes)-1]
			v.Note = n.At.UTC().Format(time.RFC3339) + " " + n.Text
		}
		views = append(views, v)
	}
	return views, nil
}

func instanceView(r store.Instance, cost float64, now time.Time) InstanceView {
	end := now
	if !r.Live() {
		end = r.GoneAt
	}
	return InstanceView{
		ID: r.ID, OfferID: r.OfferID, MachineID: r.MachineID, GPUName: r.GPUName, NumGPUs: r.NumGPUs,
		CPUCores: r.CPUCores, RAMMB: r.RAMMB, DPHTotal: r.DPHTotal, State: r.State, Wanted: r.Wanted,
		CreatedAt: r.CreatedAt.UTC().Format(time.RFC3339), UptimeSec: max(0, end.Sub(r.CreatedAt).Seconds()),
		CostSoFar: cost, SSHURL: r.SSHURL, Fleet: r.Fleet, Experiment: r.Experiment,
		Label: r.Label, EstHours: r.EstHours, EstCost: r.EstCost, Gone: !r.Live(), DestroyWait: !r.DestroyRequestedAt.IsZero(),
	}
}

// ShownState is the view's state as the ls table shows it.
func (v InstanceView) ShownState() string {
	state := v.State
	if state == "" {
		state = "provisioning"
	}
	if v.Gone {
		state = "gone"
	} else if v.DestroyWait {
		state += " (destroying)"
	}
	return state
}

// OrphanView is an orphan as ls and cost show it: a row marked orphan.
type OrphanView struct {
	ID       int64   `json:"id"`
	Orphan   bool    `json:"orphan"`
	Own      bool    `json:"own_data_dir"`
	State    string  `json:"state"`
	DPHTotal float64 `json:"dph_total"`
	GPUName  string  `json:"gpu_name"`
	NumGPUs  int     `json:"num_gpus"`
	Label    string  `json:"label"`
	Fleet    string  `json:"fleet"`
	Reason   string  `json:"reason"`
}

// OwnOrphan reports whether an orphan's label names this data dir: its
// current store (an intent lost with the WAL) or a former one (a store
// deleted or emptied). Those are safe to adopt; other stores' may be a
// colleague's.
func OwnOrphan(o Orphan, formerStores []string) bool {
	if !o.Foreign {
		return true
	}
	l, ok := ParseLabel(o.Instance.LabelText())
	return ok && slices.Contains(formerStores, l.Store)
}

// OrphanViews are the orphans as ls and cost show them.
func OrphanViews(orphans []Orphan, formerStores []string) []OrphanView {
	out := make([]OrphanView, 0, len(orphans))
	for _, o := range orphans {
		v := OrphanView{ID: o.Instance.ID, Orphan: true, Own: OwnOrphan(o, formerStores), State: o.Instance.Status(),
			DPHTotal: o.Instance.DPHTotal, GPUName: o.Instance.GPUName, NumGPUs: o.Instance.NumGPUs,
			Label: o.Instance.LabelText(), Reason: o.Reason}
		if l, ok := ParseLabel(v.Label); ok {
			v.Fleet = l.Fleet
			if o.Foreign && v.Own {
				v.Reason = fmt.Sprintf("rented from this data dir's former store %s (its state was lost)", l.Store)
			}
		}
		out = append(out, v)
	}
	return out
}

// OrphanWarning is what to say when instances with vastfleet labels bill
// while this store does not track them, and how to take them back; empty
// when there are none.
func OrphanWarning(orphans []Orphan, formerStores []string) string {
	if len(orphans) == 0 {
		return ""
	}
	own := 0
	for _, o := range orphans {
		if OwnOrphan(o, formerStores) {
			own++
		}
	}
	s := fmt.Sprintf("WARNING: %d instance(s) on this account carry vastfleet labels but are not tracked by this data dir; they bill until destroyed.\n", len(orphans))
	if own > 0 {
		s += fmt.Sprintf("  %d were rented from this data dir (its state was lost): `vastfleet reconcile --adopt` tracks them again.\n", own)
	}
	if own < len(orphans) {
		s += fmt.Sprintf("  %d name another data dir (maybe a colleague's): `vastfleet reconcile --adopt-foreign` takes them over.\n", len(orphans)-own)
	}
	return s
}
