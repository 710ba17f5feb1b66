package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/fleet"
)

// printOrphans is the section ls and cost add below their tables.
func printOrphans(w io.Writer, views []fleet.OrphanView) error {
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
			state, dash(v.Fleet), v.Label, v.Reason)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d orphan(s) bill $%.3f/hr of compute, not counted in the figures above\n", len(views), dph)
	return err
}
