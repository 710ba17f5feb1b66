package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/store"
)

// storeIDsFile lists, one a line, the id of every state store this data
// dir has had. It lives beside the database, not in it, so that when the
// database is lost (deleted, emptied, its WAL gone) the data dir still
// knows that it had state and which labels were its own.
const storeIDsFile = "store-ids"

// dataDirStores reads the store ids this data dir has recorded.
func dataDirStores(dir string) ([]string, error) {
	fh, err := os.Open(filepath.Join(dir, storeIDsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var ids []string
	sc := bufio.NewScanner(io.LimitReader(fh, 1<<20))
	for sc.Scan() {
		if id := strings.TrimSpace(sc.Text()); id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, sc.Err()
}

// rememberStore appends id to the data dir's list, once.
func rememberStore(dir, id string, known []string) error {
	if slices.Contains(known, id) {
		return nil
	}
	fh, err := os.OpenFile(filepath.Join(dir, storeIDsFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(fh, id); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// checkStoreFile warns, before the database is opened, when the data dir
// had a store but its file is gone or empty: opening it would silently
// make a new, empty store while the instances it tracked bill on.
func (f *factory) checkStoreFile(dir, path string) {
	ids, err := dataDirStores(dir)
	if err != nil || len(ids) == 0 {
		return
	}
	f.formerStores = ids
	fi, err := os.Stat(path)
	var what string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		what = "is missing"
	case err == nil && fi.Size() == 0:
		what = "is empty (0 bytes)"
	default:
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
	if err := rememberStore(dir, id, f.formerStores); err != nil {
		f.log.Warn("could not record the store id", "dir", dir, "err", err)
	}
}

// ownOrphan reports whether an orphan's label names this data dir: its
// current store (an intent lost with the WAL) or a former one (a store
// deleted or emptied). Those are safe to adopt; other stores' may be a
// colleague's.
func (f *factory) ownOrphan(o fleet.Orphan) bool {
	if !o.Foreign {
		return true
	}
	l, ok := fleet.ParseLabel(o.Instance.LabelText())
	return ok && slices.Contains(f.formerStores, l.Store)
}

// warnOrphans says loudly that instances with vastfleet labels bill while
// this store does not track them, and how to take them back.
func (f *factory) warnOrphans(orphans []fleet.Orphan) {
	if len(orphans) == 0 {
		return
	}
	own := 0
	for _, o := range orphans {
		if f.ownOrphan(o) {
			own++
		}
	}
	fmt.Fprintf(f.io.ErrOut, "WARNING: %d instance(s) on this account carry vastfleet labels but are not tracked by this data dir; they bill until destroyed.\n", len(orphans))
	if own > 0 {
		fmt.Fprintf(f.io.ErrOut, "  %d were rented from this data dir (its state was lost): `vastfleet reconcile --adopt` tracks them again.\n", own)
	}
	if own < len(orphans) {
		fmt.Fprintf(f.io.ErrOut, "  %d name another data dir (maybe a colleague's): `vastfleet reconcile --adopt-foreign` takes them over.\n", len(orphans)-own)
	}
}

// orphanJSON is an orphan as ls and cost show it: a row marked orphan.
type orphanJSON struct {
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

func (f *factory) orphanViews(orphans []fleet.Orphan) []orphanJSON {
	out := make([]orphanJSON, 0, len(orphans))
	for _, o := range orphans {
		v := orphanJSON{ID: o.Instance.ID, Orphan: true, Own: f.ownOrphan(o), State: o.Instance.Status(),
			DPHTotal: o.Instance.DPHTotal, GPUName: o.Instance.GPUName, NumGPUs: o.Instance.NumGPUs,
			Label: o.Instance.LabelText(), Reason: o.Reason}
		if l, ok := fleet.ParseLabel(v.Label); ok {
			v.Fleet = l.Fleet
			if o.Foreign && v.Own {
				v.Reason = fmt.Sprintf("rented from this data dir's former store %s (its state was lost)", l.Store)
			}
		}
		out = append(out, v)
	}
	return out
}

// printOrphans is the section ls and cost add below their tables.
func printOrphans(w io.Writer, views []orphanJSON) error {
	if len(views) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nORPHANS: billing, not tracked by this data dir (`vastfleet reconcile --adopt` tracks them)\n")
	t := newTable(w, "ID", "GPU", "$/hr", "STATE", "FLEET", "LABEL", "WHY")
	dph := 0.0
	for _, v := range views {
		dph += v.DPHTotal
		state := v.State
		if state == "" {
			state = "provisioning"
		}
		t.row(strconv.FormatInt(v.ID, 10), fmt.Sprintf("%s x%d", v.GPUName, v.NumGPUs), fmt.Sprintf("%.3f", v.DPHTotal),
			state, dash(v.Fleet), v.Label, v.Reason)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d orphan(s) bill $%.3f/hr of compute, not counted in the figures above\n", len(views), dph)
	return err
}
