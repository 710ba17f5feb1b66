package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/store"
)

// checkStoreFile warns, before the database is opened, when the data dir
// had a store but its file is gone or empty: opening it would silently
// make a new, empty store while the instances it tracked bill on.
func (f *factory) checkStoreFile(dir, path string) {
	ids, what := store.Lost(dir, path)
	if len(ids) == 0 {
		return
	}
	f.formerStores = ids
	if what == "" {
		return
	}
	f.lostStore = true
	fmt.Fprintf(f.io.ErrOut, "WARNING: the state store %s %s, but this data dir had one (store %s).\n"+
		"  Instances it rented may still run and bill: `vastfleet ls` shows them as orphans,\n"+
		"  `vastfleet reconcile --adopt` tracks them again.\n", path, what, strings.Join(ids, ", "))
}

// noteStore records the open store's id in the data dir's list.
func (f *factory) noteStore(ctx context.Context, dir string, st *store.Store) {
	id, err := st.ID(ctx)
	if err != nil {
		return
	}
	f.storeID = id
	if err := store.RememberID(dir, id, f.formerStores); err != nil {
		f.log.Warn("could not record the store id", "dir", dir, "err", err)
	}
}

// ownOrphan reports whether an orphan was rented from this data dir
// (fleet.OwnOrphan).
func (f *factory) ownOrphan(o fleet.Orphan) bool { return fleet.OwnOrphan(o, f.formerStores) }

// warnOrphans says loudly that instances with vastfleet labels bill while
// this store does not track them, and how to take them back.
func (f *factory) warnOrphans(orphans []fleet.Orphan) {
	fmt.Fprint(f.io.ErrOut, fleet.OrphanWarning(orphans, f.formerStores))
}

func (f *factory) orphanViews(orphans []fleet.Orphan) []fleet.OrphanView {
	return fleet.OrphanViews(orphans, f.formerStores)
}

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
