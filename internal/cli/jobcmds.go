package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// jobStatus is one row of `vastfleet status`.
type jobStatus struct {
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

// statusOptions is what `status` was asked.
type statusOptions struct {
	// Job is the one job to show (every job when empty).
	Job  string
	JSON bool
}

// newStatusCmd parses into statusOptions and hands them to runF (tests) or
// statusRun.
func newStatusCmd(f *factory, runF func(context.Context, *statusOptions) error) *cobra.Command {
	opts := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status [JOB]",
		Short: "Jobs started by `vastfleet up`: state, live instances, $/hr, spend",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Job = ""
			if len(args) == 1 {
				opts.Job = args[0]
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return statusRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

// statusRun is `status` once its flags are parsed.
func statusRun(ctx context.Context, f *factory, opts *statusOptions) error {
	dir, err := f.dataDir()
	if err != nil {
		return err
	}
	var ids []string
	if opts.Job != "" {
		ids = []string{opts.Job}
	} else {
		ents, _ := os.ReadDir(filepath.Join(dir, "jobs"))
		for _, e := range ents {
			if e.IsDir() {
				ids = append(ids, e.Name())
			}
		}
	}
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return err
	}
	m := &fleet.Manager{S: st, Clock: f.Clock(), Log: f.log}
	var rows []jobStatus
	for _, id := range ids {
		rec, err := loadJob(f, id)
		if err != nil {
			return err
		}
		row := jobStatus{ID: rec.ID, State: rec.State, Started: rec.StartedAt.Format("2006-01-02 15:04:05"), Estimate: rec.Estimate, Dashboard: rec.Dashboard,
			UpRunning: jobRunAlive(f, rec.ID)}
		live, err := st.Instances(ctx, store.InstanceFilter{Fleet: rec.ID})
		if err != nil {
			return err
		}
		row.Live = len(live)
		if cr, err := m.Cost(ctx, rec.ID); err == nil {
			row.Spent = cr.Total
			for _, fc := range cr.Fleets {
				row.DPH += fc.DPH
			}
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Started > rows[j].Started })
	if opts.JSON {
		if rows == nil {
			rows = []jobStatus{}
		}
		return writeJSON(f.io.Out, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(f.io.ErrOut, "no jobs yet: `vastfleet up FILE` runs one (`vastfleet demo` shows how)")
		return nil
	}
	t := newTable(f.io.Out, "JOB", "STATE", "STARTED", "LIVE", "$/HR", "SPENT", "ESTIMATE")
	for _, r := range rows {
		state := r.State
		if !r.UpRunning && (state == "launching" || state == "running") {
			state += ", cut off: up --resume " + r.ID
		}
		t.row(r.ID, state, r.Started, strconv.Itoa(r.Live), fmt.Sprintf("%.3f", r.DPH), money(r.Spent), money(r.Estimate))
	}
	return t.flush()
}

// savedReport is the cost report the job's up wrote when it finished.
func savedReport(f *factory, rec *jobRecord) (*jobReport, bool) {
	d, err := jobDir(f, rec.ID)
	if err != nil {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(d, "report.json"))
	if err != nil {
		return nil, false
	}
	var rep jobReport
	if json.Unmarshal(b, &rep) != nil {
		return nil, false
	}
	return &rep, true
}

// downOptions is what `down` was asked.
type downOptions struct {
	Job       string
	JSON      bool
	NoCollect bool
}

// newDownCmd parses into downOptions and hands them to runF (tests) or
// downRun.
func newDownCmd(f *factory, runF func(context.Context, *downOptions) error) *cobra.Command {
	opts := &downOptions{}
	cmd := &cobra.Command{
		Use:   "down JOB",
		Short: "End a job: collect its results, destroy its instances, print its cost report",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Job = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return downRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the cost report as JSON")
	cmd.Flags().BoolVar(&opts.NoCollect, "no-collect", false, "destroy without collecting results")
	return cmd
}

// downRun is `down` once its flags are parsed.
func downRun(ctx context.Context, f *factory, opts *downOptions) error {
	rec, err := loadJob(f, opts.Job)
	if err != nil {
		return err
	}
	// A job whose up still runs (detached, or in another
	// terminal) is ended by that up: it holds the coordinator with
	// the findings and items, and the market's lock.
	stopped, err := stopJobRun(ctx, f, rec)
	if err != nil {
		return err
	}
	if stopped {
		if rec, err = loadJob(f, opts.Job); err != nil {
			return err
		}
		if rep, ok := savedReport(f, rec); ok && rec.State == "done" {
			if opts.JSON {
				return writeJSON(f.io.Out, rep)
			}
			printJobReport(f, rep)
			return nil
		}
	}
	f.simHosts = true // collecting reaches into the instances
	m, err := f.manager(ctx, holderName("down", rec.ID))
	if err != nil {
		return err
	}
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return fmt.Errorf("reconcile before down: %w", err)
	}
	var errs []error
	if !opts.NoCollect && rec.Results != "" {
		live, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: rec.ID})
		if err != nil {
			return err
		}
		var ids []string
		for _, r := range live {
			if r.State == "running" {
				ids = append(ids, strconv.FormatInt(r.ID, 10))
			}
		}
		if len(ids) > 0 {
			nodes, _, err := f.selectNodes(ctx, "", false, ids, true)
			if err != nil {
				return fmt.Errorf("%w (--no-collect destroys without collecting)", err)
			}
			if err := collectJob(ctx, f, nil, rec, nodes); err != nil {
				return fmt.Errorf("nothing destroyed: %w (--no-collect destroys without collecting)", err)
			}
		}
	}
	if err := destroyJob(ctx, f, m, rec.ID); err != nil {
		errs = append(errs, err)
	}
	rep, err := costJob(ctx, f, m, nil, rec)
	if err != nil {
		return err
	}
	rec.State = "done"
	if err := saveJob(f, rec); err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(f.io.Out, rep)
	}
	printJobReport(f, rep)
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// nodeLog is one node's part of `vastfleet logs JOB --json`.
type nodeLog struct {
	Node   string `json:"node"`
	ID     int64  `json:"id"`
	Source string `json:"source"` // "sessions" (the agent's logs, over SSH) or "container"
	Log    string `json:"log"`
	Error  string `json:"error,omitempty"`
}

// jobLogs prints the session logs of the nodes that ran the job, each
// under its node's name; a node out of reach gives its container log.
func jobLogs(ctx context.Context, f *factory, id, nodeSel, session string, tail int, asJSON bool) error {
	rec, err := loadJob(f, id)
	if err != nil {
		return err
	}
	if session != "" && !sessionName.MatchString(session) {
		return usagef("--session %q: a session name is letters, digits, '_' and '-'", session)
	}
	ids := slices.Clone(rec.RunIDs)
	if len(ids) == 0 {
		st, err := f.Store(ctx, false, "")
		if err != nil {
			return err
		}
		recs, err := st.Instances(ctx, store.InstanceFilter{Fleet: rec.ID})
		if err != nil {
			return err
		}
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	if len(ids) == 0 {
		return fmt.Errorf("job %s has no nodes yet (see `vastfleet status %s`)", id, id)
	}
	// Nodes are named as up names them: by rank in instance-id order.
	names := map[int64]string{}
	for rank, n := range ids {
		names[n] = fmt.Sprintf("%s-node-%d", rec.ID, rank)
	}
	if nodeSel != "" {
		var pick int64
		for rank, n := range ids {
			if nodeSel == strconv.Itoa(rank) || nodeSel == "node-"+strconv.Itoa(rank) || nodeSel == names[n] || nodeSel == strconv.FormatInt(n, 10) {
				pick = n
			}
		}
		if pick == 0 {
			return usagef("--node %q: job %s has nodes 0..%d (rank, node-RANK or instance id)", nodeSel, id, len(ids)-1)
		}
		ids = []int64{pick}
	}
	f.simHosts = true // the simulated nodes answer SSH while this runs
	op, err := f.operator(ctx)
	if err != nil {
		return err
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return err
	}
	listing, err := p.ListInstances(ctx)
	if err != nil {
		return err
	}
	running := map[int64]bool{}
	for _, in := range listing.Instances {
		running[in.ID] = in.ActualStatus != nil && *in.ActualStatus == "running"
	}
	var reach []string
	for _, n := range ids {
		if running[n] {
			reach = append(reach, strconv.FormatInt(n, 10))
		}
	}
	out := map[int64]*nodeLog{}
	if len(reach) > 0 {
		nodes, _, err := f.selectNodes(ctx, "", false, reach, true)
		if err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "vastfleet-logs-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		lines := "cat"
		if tail > 0 {
			lines = "tail -n " + strconv.Itoa(tail)
		}
		glob := "*.log"
		if session != "" {
			glob = session + ".log"
		}
		script := `d="${VASTFLEET_AGENT_DIR:-$HOME/.vastfleet}/logs"; n=0; for f in "$d"/` + glob + `; do [ -f "$f" ] || continue; n=1; s=$(basename "$f" .log); echo "--- session $s"; ` + lines + ` "$f"; done; [ $n = 1 ] || echo "(no session log in $d yet)"`
		rows, err := execOnNodes(ctx, f, p, nodes, script, 64, time.Minute, dir, true)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.Error != "" || r.ExitCode != 0 {
				continue // the container log below
			}
			b, err := os.ReadFile(r.OutputFile)
			if err != nil {
				continue
			}
			out[r.ID] = &nodeLog{ID: r.ID, Source: "sessions", Log: string(b)}
		}
	}
	var all []nodeLog
	for _, n := range ids {
		l := out[n]
		if l == nil {
			l = &nodeLog{ID: n, Source: "container"}
			text, err := op.InstanceLogs(ctx, n, tail)
			if err != nil {
				l.Error = err.Error()
			}
			l.Log = text
		}
		l.Node = names[n]
		all = append(all, *l)
	}
	if asJSON {
		return writeJSON(f.io.Out, all)
	}
	for _, l := range all {
		fmt.Fprintf(f.io.Out, "==> %s (instance %d, %s log) <==\n", l.Node, l.ID, l.Source)
		if l.Error != "" {
			fmt.Fprintf(f.io.Out, "(%s)\n", termSafe(l.Error))
		}
		// Line by line: a log may hold any bytes, but not ones that
		// drive this terminal.
		for _, line := range strings.SplitAfter(l.Log, "\n") {
			if line = strings.TrimSuffix(line, "\n"); line != "" {
				fmt.Fprintln(f.io.Out, termsafe.Text(line))
			}
		}
	}
	return nil
}

var sessionName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
