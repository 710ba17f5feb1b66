package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// statusOptions is what `status` was asked.
type statusOptions struct {
	// Job is the one job to show (every job when empty).
	Job string
	cmdutil.JSONFlags
}

// newStatusCmd parses into statusOptions and hands them to runF (tests) or
// statusRun.
func newStatusCmd(f *factory.Factory, runF func(context.Context, *statusOptions) error) *cobra.Command {
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
			return run(cmd, f, opts, runF, statusRun)
		},
	}
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	return cmd
}

// statusRun is `status` once its flags are parsed.
func statusRun(ctx context.Context, f *factory.Factory, opts *statusOptions) error {
	d, recs, done, err := f.StatusDeps(ctx)
	if err != nil {
		return err
	}
	defer done()
	all, err := job.Select(ctx, recs, opts.Job)
	if err != nil {
		return err
	}
	rows, err := job.Statuses(ctx, d, all, func(id string) bool { return jobRunAlive(f, id) })
	if err != nil {
		return err
	}
	if len(rows) == 0 && !opts.JSON {
		fmt.Fprintln(f.IO.ErrOut, "no jobs yet: `vastfleet up FILE` runs one (`vastfleet demo` shows how)")
		return nil
	}
	return cmdutil.PrintRows(f.IO.Out, opts.JSONFlags, rows, job.StatusHeader, job.Status.Cells)
}

// downOptions is what `down` was asked.
type downOptions struct {
	Job string
	cmdutil.JSONFlags
	NoCollect bool
}

// newDownCmd parses into downOptions and hands them to runF (tests) or
// downRun.
func newDownCmd(f *factory.Factory, runF func(context.Context, *downOptions) error) *cobra.Command {
	opts := &downOptions{}
	cmd := &cobra.Command{
		Use:   "down JOB",
		Short: "End a job: collect its results, destroy its instances, print its cost report",
		Long: `End a job from any terminal. If its up still runs (detached, or in another
terminal), that up is asked to collect, destroy and report. Otherwise (its up
ended, crashed or was killed) down collects what the nodes still running can
give, destroys every instance of the job whatever collecting gave, writes the
coordinator's findings and item results (findings.jsonl, items.jsonl) beside
the collected files, and prints the cost report; what was not collected is
named, and down then exits 3.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Job = args[0]
			return run(cmd, f, opts, runF, downRun)
		},
	}
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print the cost report as JSON")
	cmd.Flags().BoolVar(&opts.NoCollect, "no-collect", false, "destroy without collecting results")
	return withNeeds(f, cmd, reachesNodes) // collecting reaches into the instances
}

// downRun is `down` once its flags are parsed.
func downRun(ctx context.Context, f *factory.Factory, opts *downOptions) error {
	rep, err := downJob(ctx, f, opts)
	if rep != nil {
		if opts.JSON {
			return errors.Join(cmdutil.WriteJSON(opts.Out(f.IO.Out), rep), err)
		}
		rep.WriteText(f.IO.Out)
	}
	return err
}

// downJob has the job's running up end it, or ends it here.
func downJob(ctx context.Context, f *factory.Factory, opts *downOptions) (*job.Report, error) {
	rec, err := f.LoadJob(ctx, opts.Job)
	if err != nil {
		return nil, err
	}
	recs, err := f.JobRecords(ctx)
	if err != nil {
		return nil, err
	}
	view := job.NewView(f.IO, opts.JSON)
	defer view.Close()
	return job.End(ctx, recs, rec, opts.NoCollect, f.IO.ErrOut, func() (*job.Deps, func(), error) { return f.DownDeps(ctx, rec.ID, view.Event) })
}

// jobLogs prints the session logs of the nodes that ran the job, each
// under its node's name; a node out of reach gives its container log.
func jobLogs(ctx context.Context, f *factory.Factory, id, nodeSel, session string, tail int, js cmdutil.JSONFlags) error {
	if session != "" && !wire.ValidSessionName(session) {
		return usagef("--session %q: a session name is letters, digits, '_' and '-'", session)
	}
	rec, err := f.LoadJob(ctx, id)
	if err != nil {
		return err
	}
	all, err := f.JobLogs(ctx, rec, job.LogsOptions{Node: nodeSel, Session: session, Tail: tail})
	if err != nil {
		return err
	}
	if js.JSON {
		return cmdutil.WriteJSON(js.Out(f.IO.Out), all)
	}
	job.WriteLogs(f.IO.Out, all)
	return nil
}

// The job package's types under the names this package's commands and
// tests use.
type (
	jobReport = job.Report
	jobNode   = job.ReportNode
	itemLine  = job.ItemLine
	nodeLog   = job.NodeLog
	jobStatus = job.Status
)
