package cli

import (
	"context"
	"os"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/jobfile"
)

// lockJobRun takes the job's up lock, or says who holds it.
func lockJobRun(f *factory.Factory, id string) (func(), error) {
	dir, err := f.JobsDir()
	if err != nil {
		return nil, err
	}
	return job.LockRun(dir, id)
}

// jobRunAlive reports whether an up process still holds the job's lock.
func jobRunAlive(f *factory.Factory, id string) bool {
	dir, err := f.JobsDir()
	return err != nil || job.RunAlive(dir, id)
}

// detachUp runs this same command again as the job's background up (less
// --detach, with the job's name) and returns once the job runs.
func detachUp(ctx context.Context, f *factory.Factory, opts *upOptions, jf *jobfile.Job) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := f.JobsDir()
	if err != nil {
		return err
	}
	id := job.NewID(jf.Name)
	bg, err := job.Detach(ctx, job.DetachOptions{JobsDir: dir, ID: id, Exe: exe, Args: job.BackgroundArgs(os.Args[1:], id),
		Load:   f.LoadJob,
		ErrOut: f.IO.ErrOut, Quiet: opts.JSON})
	if bg == nil || err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), bg)
	}
	bg.WriteText(f.IO.Out)
	return nil
}
