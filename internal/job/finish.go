package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// finishTimeout bounds collecting, destroying and reporting.
const finishTimeout = 15 * time.Minute

// finish ends the job as choice says: keep the nodes, or collect what can
// be collected, destroy (unless auto_destroy is false), write the results
// and report. It runs on a context of its own: teardown outlives Ctrl+C.
func (r *runner) finish(ctx context.Context, choice string, cause error) (*Report, error) {
	if choice == Keep {
		r.rec.State = StateKept
		r.d.emit(KeptRunning{About{r.rec.ID}, true})
		return nil, errors.Join(cause, r.save(context.WithoutCancel(ctx)), launch.ErrInterrupted)
	}
	destroy := r.o.Job.AutoDestroy || choice == Destroy || cause != nil && len(r.nodes) == 0
	rep, err := wrapUp(ctx, r.d, r.rec, r.nodes, choice == Collect, destroy)
	if ctx.Err() != nil {
		err = errors.Join(err, launch.ErrInterrupted)
	}
	return rep, errors.Join(cause, err)
}

// wrapUp collects the nodes' files (when asked), writes the coordinator's
// findings and item results, destroys (when asked) and reports. A
// failure to collect never keeps the nodes billing: it is reported after
// the destroy.
func wrapUp(ctx context.Context, d *Deps, rec *Record, nodes []Node, collect, destroy bool) (*Report, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	var errs []error
	if collect {
		errs = append(errs, collectFiles(ctx, d, rec, nodes))
	}
	// The findings and item results are in the coordinator's database on
	// this machine: they are written out whatever happens to the nodes.
	errs = append(errs, writeResults(ctx, d, rec))
	if destroy {
		errs = append(errs, destroyAll(ctx, d, rec.ID))
		rec.State = StateDone
	} else {
		d.emit(KeptRunning{About{rec.ID}, false})
		rec.State = StateKept
	}
	rep, err := report(ctx, d, rec)
	errs = append(errs, err, d.Records.Save(ctx, rec))
	return rep, errors.Join(errs...)
}

// Down ends a job whose up no longer runs (it ended, crashed or was
// killed): it collects what can be collected unless noCollect, destroys
// every instance of the job, writes the findings and item results the
// coordinator's database holds, and reports, as a clean finish does.
func Down(ctx context.Context, d *Deps, rec *Record, noCollect bool) (*Report, error) {
	var nodes []Node
	var errs []error
	if !noCollect && rec.Results != "" {
		var err error
		if nodes, err = downNodes(ctx, d, rec); err != nil {
			errs = append(errs, fmt.Errorf("job %s: finding its nodes to collect from: %w", rec.ID, err))
		}
	}
	rep, err := wrapUp(ctx, d, rec, nodes, !noCollect, true)
	return rep, errors.Join(append(errs, err)...)
}

// downNodes are the job's instances that the marketplace lists as
// running: the others cannot be collected from, and each is said so.
func downNodes(ctx context.Context, d *Deps, rec *Record) ([]Node, error) {
	live, err := d.Store.Instances(ctx, store.InstanceFilter{Fleet: rec.ID})
	if err != nil {
		return nil, err
	}
	var all []Node
	for _, in := range live {
		all = append(all, Node{ID: in.ID})
	}
	reach, lost := running(ctx, d.Provider, all)
	for _, l := range lost {
		d.emit(CollectMissed{About{rec.ID}, l.ID, l.Error})
	}
	if len(reach) == 0 {
		return nil, nil
	}
	return d.Nodes.Select(ctx, ids(reach))
}

// running splits nodes by what the marketplace lists now: an instance
// that is offline, stopped or gone cannot answer SSH, and trying would
// only wait out the connection retries meant for a booting one. If the
// listing fails, every node is tried.
func running(ctx context.Context, p provider.Provider, nodes []Node) (reachable []Node, lost []StepResult) {
	l, err := p.ListInstances(ctx)
	if err != nil {
		return nodes, nil
	}
	state := map[int64]string{}
	for _, row := range l.Instances {
		state[row.ID] = row.Status()
	}
	for _, n := range nodes {
		st, ok := state[n.ID]
		row := StepResult{ID: n.ID, Node: n.Name}
		switch {
		case !ok:
			row.Error = "the instance is gone from the marketplace's listing: its files went with it"
		case st == provider.StateOffline:
			row.Error = "the host is offline: not collected; its files come back only if the host does"
		case st != provider.StateRunning:
			row.Error = fmt.Sprintf("the instance is %s, not running: not collected (a stopped instance's files can still be copied with vast's copy)", st)
		default:
			reachable = append(reachable, n)
			continue
		}
		lost = append(lost, row)
	}
	return reachable, lost
}

// collectFiles pulls the results directory from the nodes into
// LOCAL/<node>/; a node that cannot give them is named, not waited for.
func collectFiles(ctx context.Context, d *Deps, rec *Record, nodes []Node) error {
	if rec.Results == "" || len(nodes) == 0 {
		return nil
	}
	reachable, lost := running(ctx, d.Provider, nodes)
	var rows []StepResult
	if len(reachable) > 0 {
		got, err := d.Nodes.Collect(ctx, reachable, rec.Results, filepath.Dir(rec.LocalDir))
		if err != nil {
			return fmt.Errorf("job %s: collecting: %w", rec.ID, err)
		}
		rows = got
	}
	rows = append(rows, lost...)
	files, failed := 0, 0
	for _, row := range rows {
		files += row.Files
		if row.Error != "" {
			failed++
			d.emit(CollectMissed{About{rec.ID}, row.ID, row.Error})
		}
	}
	d.emit(Collected{About{rec.ID}, files, len(rows) - failed, rec.LocalDir})
	return usage.FanOut("collect", failed, len(rows))
}

// writeResults writes every finding and item result the coordinator's
// database holds to LOCAL/findings.jsonl and LOCAL/items.jsonl.
func writeResults(ctx context.Context, d *Deps, rec *Record) error {
	if d.Results == nil {
		return nil
	}
	var errs []error
	for _, w := range []struct {
		kind, file string
		write      func(context.Context, Results, *Record) (int, error)
	}{{"finding", "findings.jsonl", writeFindings}, {"item result", "items.jsonl", writeItemResults}} {
		n, err := w.write(ctx, d.Results, rec)
		if err != nil {
			errs = append(errs, fmt.Errorf("job %s: writing %s: %w", rec.ID, w.file, err))
		} else if n > 0 {
			d.emit(ResultsWritten{About{rec.ID}, w.kind, n, filepath.Join(rec.LocalDir, w.file)})
		}
	}
	return errors.Join(errs...)
}

// destroyAll destroys every live instance of the job's fleet. An instance
// the marketplace no longer lists is gone, which is what was asked.
func destroyAll(ctx context.Context, d *Deps, id string) error {
	live, err := d.Store.Instances(ctx, store.InstanceFilter{Fleet: id})
	if err != nil {
		return err
	}
	if len(live) == 0 {
		return nil
	}
	list := make([]int64, 0, len(live))
	for _, in := range live {
		list = append(list, in.ID)
	}
	if err := d.Fleet.Destroy(ctx, list); err != nil {
		return fmt.Errorf("job %s: destroying: %w (`vastfleet down %s` tries again)", id, err, id)
	}
	d.emit(Destroyed{About{id}, len(list)})
	return nil
}

// End ends the job rec from any terminal (down): its up, if it still
// runs, is asked to (EndByItsUp, its notes on w); else it is ended here
// (Down) with the deps deps gives, which done releases.
func End(ctx context.Context, recs *Records, rec *Record, noCollect bool, w io.Writer, deps func() (d *Deps, done func(), err error)) (*Report, error) {
	rec, rep, err := EndByItsUp(ctx, recs, rec, w)
	if rep != nil || err != nil {
		return rep, err
	}
	d, done, err := deps()
	if err != nil {
		return nil, err
	}
	defer done()
	return Down(ctx, d, rec, noCollect)
}
