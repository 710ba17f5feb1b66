package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/store"
)

type lsOptions struct {
	Fleet string
	All   bool
	JSONFlags
}

// newLsCmd parses into lsOptions and hands them to runF (tests) or lsRun.
func newLsCmd(f *factory, runF func(context.Context, *lsOptions) error) *cobra.Command {
	opts := &lsOptions{}
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List instances vastfleet tracks, refreshed from the marketplace",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return lsRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Fleet, "fleet", "", "only this fleet")
	cmd.Flags().BoolVar(&opts.All, "all", false, "include destroyed instances")
	addJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	return cmd
}

// lsRun is `ls` once its flags are parsed.
func lsRun(ctx context.Context, f *factory, opts *lsOptions) error {
	m, err := f.observed(ctx)
	if err != nil {
		return err
	}
	recs, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: opts.Fleet, IncludeGone: opts.All})
	if err != nil {
		return err
	}
	views, err := instanceViews(ctx, m, recs, f.Clock().Now())
	if err != nil {
		return err
	}
	orphans := f.orphanViews(f.orphans)
	if opts.JSON {
		rows := make([]any, 0, len(views)+len(orphans))
		for _, v := range views {
			rows = append(rows, v)
		}
		for _, o := range orphans {
			rows = append(rows, o)
		}
		return writeJSON(opts.out(f.io.Out), rows)
	}
	if len(views) > 0 || len(orphans) == 0 {
		if err := printInstances(f, views); err != nil {
			return err
		}
	}
	return printOrphans(f.io.Out, orphans)
}

// instanceJSON is `ls --json`'s row: the marketplace's names where they
// exist (id, dph_total, ssh_url, ...) plus vastfleet's own.
type instanceJSON struct {
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
	Next *fleet.Step `json:"next,omitempty"`
}

// instanceViews prices each instance from its whole recorded timeline, the
// one cost rule `cost` uses too.
func instanceViews(ctx context.Context, m *fleet.Manager, recs []store.Instance, now time.Time) ([]instanceJSON, error) {
	views := make([]instanceJSON, 0, len(recs))
	ladders := map[string]fleet.Ladder{}
	for _, r := range recs {
		c, err := m.CostOf(ctx, r, now)
		if err != nil {
			return nil, err
		}
		v := instanceView(r, c.Total, now)
		l, ok := ladders[r.Fleet]
		if !ok && r.Fleet != "" {
			if l, err = fleet.FleetLadder(ctx, m.S, r.Fleet); err != nil {
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

func instanceView(r store.Instance, cost float64, now time.Time) instanceJSON {
	end := now
	if !r.Live() {
		end = r.GoneAt
	}
	return instanceJSON{
		ID: r.ID, OfferID: r.OfferID, MachineID: r.MachineID, GPUName: r.GPUName, NumGPUs: r.NumGPUs,
		CPUCores: r.CPUCores, RAMMB: r.RAMMB, DPHTotal: r.DPHTotal, State: r.State, Wanted: r.Wanted,
		CreatedAt: r.CreatedAt.UTC().Format(time.RFC3339), UptimeSec: max(0, end.Sub(r.CreatedAt).Seconds()),
		CostSoFar: cost, SSHURL: r.SSHURL, Fleet: r.Fleet, Experiment: r.Experiment,
		Label: r.Label, EstHours: r.EstHours, EstCost: r.EstCost, Gone: !r.Live(), DestroyWait: !r.DestroyRequestedAt.IsZero(),
	}
}

func printInstances(f *factory, views []instanceJSON) error {
	if len(views) == 0 {
		fmt.Fprintln(f.io.ErrOut, "no instances (rent one with `vastfleet rent OFFER_ID` or `vastfleet launch`)")
		return nil
	}
	t := newTable(f.io.Out, "ID", "OFFER", "GPU", "vCPU", "$/hr", "STATE", "UPTIME", "COST", "SSH", "FLEET")
	for _, v := range views {
		state := v.State
		if state == "" {
			state = "provisioning"
		}
		if v.Gone {
			state = "gone"
		} else if v.DestroyWait {
			state += " (destroying)"
		}
		fleetName := v.Fleet
		if v.Experiment != "" {
			fleetName += "/" + v.Experiment
		}
		t.row(strconv.FormatInt(v.ID, 10), strconv.FormatInt(v.OfferID, 10), fmt.Sprintf("%s x%d", v.GPUName, v.NumGPUs),
			fmtNum(v.CPUCores), fmt.Sprintf("%.3f", v.DPHTotal), state,
			(time.Duration(v.UptimeSec) * time.Second).Round(time.Minute).String(),
			fmt.Sprintf("$%.3f", v.CostSoFar), dash(v.SSHURL), fleetName)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, v := range views {
		if v.Note != "" {
			fmt.Fprintf(f.io.Out, "instance %d: %s\n", v.ID, v.Note)
		}
		if v.Next != nil {
			fmt.Fprintf(f.io.Out, "instance %d: teardown ladder: %s at %s (%s)\n", v.ID, v.Next.Action, v.Next.At.UTC().Format(time.RFC3339), v.Next.Reason)
		}
	}
	return nil
}
