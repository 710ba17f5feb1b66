package job

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
)

// Sessions are the agent's sessions for a job: run (once, never
// restarted, so that its exit ends the job) and the named sessions, each
// waiting for the go marker (the agent waits before it starts one, so an
// item worker leases nothing on a node left out of the run), with the
// node's rank variables and the workdir wd.
func Sessions(j *jobfile.Job, wd string) []launch.Session {
	wrap := func(cmd string) string {
		return `until [ -e "$HOME/` + GoMarker + `" ]; do sleep 0.2; done; . "$HOME/` + GoMarker + `"; mkdir -p ` + wd + ` && cd ` + wd + ` && ` + cmd
	}
	var out []launch.Session
	if j.Run != "" {
		out = append(out, launch.Session{Name: RunSession, Command: wrap(j.Run), Restart: "never", After: GoMarker})
	}
	for _, s := range j.Sessions {
		out = append(out, launch.Session{Name: s.Name, Command: wrap(s.Command), After: GoMarker})
	}
	return out
}

// startScript writes the go marker, carrying the rank variables into the
// sessions.
const startScript = `{ for v in VASTFLEET_NODE_RANK VASTFLEET_NUM_NODES VASTFLEET_MASTER_ADDR VASTFLEET_GPUS_PER_NODE VASTFLEET_NODE_NAME; do eval "printf 'export %s=%s\n' $v \"\$$v\""; done; } > "$HOME/` + GoMarker + `.tmp" && mv -f "$HOME/` + GoMarker + `.tmp" "$HOME/` + GoMarker + `"`

// prepare syncs the workdir, runs setup and writes the go marker on every
// node; nodes that fail a step are left out of the run.
func (r *runner) prepare(ctx context.Context) error {
	kept, err := r.prepareNodes(ctx, r.nodes, "", r.d.emit)
	r.nodes = kept
	if err != nil {
		return err
	}
	r.d.emit(Started{About{r.rec.ID}, len(r.nodes), clock.Kind(r.d.Clock)})
	r.rec.RunIDs = ids(r.nodes)
	r.rec.Started = true
	return r.save(ctx)
}

// prepareNodes syncs the workdir to nodes, runs setup on them and writes
// their go marker, telling emit how each step went; it returns the nodes
// every step succeeded on, and fails when none is left. Its logs are in
// the job's directory, under sub when set (a replacement's, beside those
// of the node whose name it takes). It reads the job's options and record
// but changes neither: a replacement prepares beside the watch.
func (r *runner) prepareNodes(ctx context.Context, nodes []Node, sub string, emit func(Event)) ([]Node, error) {
	logs, err := r.d.Records.JobDir(r.rec.ID)
	if err != nil {
		return nodes, err
	}
	logs = filepath.Join(logs, sub)
	if nodes, err = r.sync(ctx, nodes, emit); err != nil {
		return nodes, err
	}
	for i, cmd := range r.o.Job.Setup {
		rows, err := r.d.Nodes.Exec(ctx, nodes, "mkdir -p "+r.d.WorkdirOnNode+" && cd "+r.d.WorkdirOnNode+" && "+cmd,
			filepath.Join(logs, fmt.Sprintf("setup-%d", i+1)))
		if err != nil {
			return nodes, err
		}
		emit(SetupDone{About{r.rec.ID}, i + 1, len(r.o.Job.Setup), succeeded(rows), cmd})
		if nodes, err = keep(r.rec.ID, "setup", nodes, rows, emit); err != nil {
			return nodes, err
		}
	}
	rows, err := r.d.Nodes.Exec(ctx, nodes, startScript, filepath.Join(logs, "start"))
	if err != nil {
		return nodes, err
	}
	return keep(r.rec.ID, "start", nodes, rows, emit)
}

// sync sends the workdir to the nodes.
func (r *runner) sync(ctx context.Context, nodes []Node, emit func(Event)) ([]Node, error) {
	wd := r.o.Job.Workdir
	if wd == "" {
		return nodes, nil
	}
	files, rows, err := r.d.Nodes.Sync(ctx, nodes, wd, RemoteWorkdir)
	if err != nil {
		return nodes, err
	}
	var sent int64
	for _, row := range rows {
		sent += row.Bytes
	}
	emit(Synced{About{r.rec.ID}, wd, files, sent, succeeded(rows)})
	return keep(r.rec.ID, "sync", nodes, rows, emit)
}

// keep leaves out of job's run the nodes a step failed on, saying so; it
// fails when no node is left.
func keep(job, step string, nodes []Node, rows []StepResult, emit func(Event)) ([]Node, error) {
	failed := map[int64]bool{}
	for _, row := range rows {
		if row.Error != "" {
			failed[row.ID] = true
			emit(StepFailed{About{job}, step, row.Node, row.ID, row.Error})
		}
	}
	nodes = slices.DeleteFunc(nodes, func(n Node) bool { return failed[n.ID] })
	if len(nodes) == 0 {
		return nil, fmt.Errorf("job %s: %s failed on every node", job, step)
	}
	return nodes, nil
}

// succeeded is how many nodes a step succeeded on.
func succeeded(rows []StepResult) int {
	n := 0
	for _, row := range rows {
		if row.Error == "" {
			n++
		}
	}
	return n
}
