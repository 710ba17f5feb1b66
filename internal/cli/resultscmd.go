package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/server"
)

// resultsOptions is what `results` was asked.
type resultsOptions struct {
	Job string
	To  string
}

// newResultsCmd parses into resultsOptions and hands them to runF
// (tests) or resultsRun.
func newResultsCmd(f *factory.Factory, runF func(context.Context, *resultsOptions) error) *cobra.Command {
	opts := &resultsOptions{}
	cmd := &cobra.Command{
		Use:   "results JOB [--to DIR]",
		Short: "A job's results: downloaded from the server that ran it, or where a local up put them",
		Long: `Against a server (--server URL or the current context), download the job's
results (what its nodes' results held, findings.jsonl, items.jsonl) into
DIR/JOB; a directory already there is never overwritten. A viewer token
may. Without a server, say where the local up put them.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Job = args[0]
			return run(cmd, f, opts, runF, resultsRun)
		},
	}
	cmd.Flags().StringVar(&opts.To, "to", "results", "the directory the job's results go under (as DIR/JOB)")
	return cmd
}

// resultsRun is `results` once its flags are parsed.
func resultsRun(ctx context.Context, f *factory.Factory, opts *resultsOptions) error {
	if !server.ValidJobName(opts.Job) {
		return usagef("job %q: a job's name, as status lists it", opts.Job)
	}
	cl, err := f.ServerClient()
	if err != nil {
		return err
	}
	if cl == nil {
		rec, err := f.LoadJob(ctx, opts.Job)
		if err != nil {
			return err
		}
		dir, err := rec.ResultsDir()
		if err == nil {
			fmt.Fprintln(f.IO.Out, dir)
		}
		return err
	}
	dir := filepath.Join(opts.To, opts.Job)
	n, err := cl.Results(ctx, opts.Job, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "%d files of job %s from %s\n", n, opts.Job, cl.URL)
	fmt.Fprintln(f.IO.Out, dir)
	return nil
}
