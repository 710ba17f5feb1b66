package fleet

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
)

// WriteInstances writes the instances as ls and rent show them: a table,
// then each one's note and next teardown step; none is said on errOut.
func WriteInstances(w, errOut io.Writer, views []InstanceView) error {
	if len(views) == 0 {
		fmt.Fprintln(errOut, "no instances (rent one with `vastfleet rent OFFER_ID` or `vastfleet launch`)")
		return nil
	}
	t := cmdutil.NewTable(w, "ID", "OFFER", "GPU", "vCPU", "$/hr", "STATE", "UPTIME", "COST", "SSH", "FLEET")
	for _, v := range views {
		fleetName := v.Fleet
		if v.Experiment != "" {
			fleetName += "/" + v.Experiment
		}
		t.Row(strconv.FormatInt(v.ID, 10), strconv.FormatInt(v.OfferID, 10), fmt.Sprintf("%s x%d", v.GPUName, v.NumGPUs),
			cmdutil.Num(v.CPUCores), fmt.Sprintf("%.3f", v.DPHTotal), v.ShownState(),
			(time.Duration(v.UptimeSec) * time.Second).Round(time.Minute).String(),
			fmt.Sprintf("$%.3f", v.CostSoFar), cmdutil.Dash(v.SSHURL), fleetName)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	for _, v := range views {
		if v.Note != "" {
			fmt.Fprintf(w, "instance %d: %s\n", v.ID, v.Note)
		}
		if v.Next != nil {
			fmt.Fprintf(w, "instance %d: teardown ladder: %s at %s (%s)\n", v.ID, v.Next.Action, v.Next.At.UTC().Format(time.RFC3339), v.Next.Reason)
		}
	}
	return nil
}

// WriteOrphans is the section ls and cost add below their tables.
func WriteOrphans(w io.Writer, views []OrphanView) error {
	if len(views) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nORPHANS: billing, not tracked by this data dir (`vastfleet reconcile --adopt` tracks them)\n")
	t := cmdutil.NewTable(w, "ID", "GPU", "$/hr", "STATE", "FLEET", "LABEL", "WHY")
	dph := 0.0
	for _, v := range views {
		dph += v.DPHTotal
		state := v.State
		if state == "" {
			state = "provisioning"
		}
		t.Row(strconv.FormatInt(v.ID, 10), fmt.Sprintf("%s x%d", v.GPUName, v.NumGPUs), fmt.Sprintf("%.3f", v.DPHTotal),
			state, cmdutil.Dash(v.Fleet), v.Label, v.Reason)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d orphan(s) bill $%.3f/hr of compute, not counted in the figures above\n", len(views), dph)
	return err
}

// Reporter prints what a reap pass did (Sweep and Pass's OnLaddered and
// OnReaped): a line each, a failure on ErrOut.
type Reporter struct{ Out, ErrOut io.Writer }

func (r Reporter) Laddered(fleetName string, d Laddered) { r.report(d.Report(fleetName)) }

func (r Reporter) Reaped(fleetName string, x Reaped) { r.report(x.Report(fleetName)) }

func (r Reporter) report(line string, failed bool) {
	w := r.Out
	if failed {
		w = r.ErrOut
	}
	fmt.Fprintln(w, line)
}

// Listing is what ls shows: the tracked instances, then the orphans.
type Listing struct {
	Instances []InstanceView
	Orphans   []OrphanView
}

// Rows are the listing as ls --json writes it: one array, the instances
// first.
func (l Listing) Rows() []any {
	rows := make([]any, 0, len(l.Instances)+len(l.Orphans))
	for _, v := range l.Instances {
		rows = append(rows, v)
	}
	for _, o := range l.Orphans {
		rows = append(rows, o)
	}
	return rows
}

// WriteText writes the instances' table (none said on errOut, unless
// there are orphans) and the orphans' section.
func (l Listing) WriteText(w, errOut io.Writer) error {
	if len(l.Instances) > 0 || len(l.Orphans) == 0 {
		if err := WriteInstances(w, errOut, l.Instances); err != nil {
			return err
		}
	}
	return WriteOrphans(w, l.Orphans)
}
