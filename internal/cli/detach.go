package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/vastfleet/vastfleet/internal/filelock"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/procgroup"
)

// A job's up process holds jobs/<job>/up.lock (flock) for as long as it
// runs; the kernel drops it when the process ends, however it ends. So
// "is this job's up alive?" never trusts a recorded pid that may have
// been reused: down asks the lock, and only then signals the pid.
const upLockFile = "up.lock"

// lockJobRun takes the job's up lock, or says who holds it.
func lockJobRun(f *factory, id string) (func(), error) {
	d, err := jobDir(f, id)
	if err != nil {
		return nil, err
	}
	fh, err := filelock.Acquire(filepath.Join(d, upLockFile))
	if errors.Is(err, filelock.ErrBusy) {
		return nil, usagef("job %s: another `vastfleet up` runs it (stop it with `vastfleet down %s`)", id, id)
	}
	if err != nil {
		return nil, err
	}
	return func() { filelock.Release(fh) }, nil
}

// jobRunAlive reports whether an up process still holds the job's lock.
func jobRunAlive(f *factory, id string) bool {
	release, err := lockJobRun(f, id)
	if err != nil {
		return true
	}
	release()
	return false
}

// detachedUp is what `up --detach` prints.
type detachedUp struct {
	Job       string `json:"job"`
	State     string `json:"state"`
	Dashboard string `json:"dashboard"`
	PID       int    `json:"pid"`
	Log       string `json:"log"`
}

// detachUp starts this same command again as a background process in a
// session of its own (no terminal to lose), with its output in
// jobs/<job>/up.log. That process is the job's supervisor: it keeps the
// coordinator (and, on the simulator, the market and its machines) alive,
// watches, collects, destroys and reports as a foreground up would. It
// returns once the job runs (or up has ended early, with its error).
func detachUp(ctx context.Context, f *factory, opts *upOptions, jf *jobfile.Job) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	id := jobID(jf.Name)
	d, err := jobDir(f, id)
	if err != nil {
		return err
	}
	logPath := filepath.Join(d, "up.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := slices.DeleteFunc(slices.Clone(os.Args[1:]), func(a string) bool {
		return a == "--detach" || strings.HasPrefix(a, "--detach=")
	})
	cmd := exec.Command(exe, append(args, "--job-id", id)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	procgroup.Detach(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the job's background up: %w", err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	bg := detachedUp{Job: id, PID: cmd.Process.Pid, Log: logPath}
	rec, err := waitDetached(ctx, f, opts, bg, ended)
	if rec == nil || err != nil {
		return err
	}
	bg.State, bg.Dashboard = rec.State, rec.Dashboard
	if opts.JSON {
		return writeJSON(opts.out(f.io.Out), bg)
	}
	fmt.Fprintf(f.io.Out, "job %s is %s in the background (pid %d)\n  dashboard  %s\n  follow     vastfleet status %s; vastfleet logs %s; its up's output: %s\n  stop       vastfleet down %s  (collects, destroys, prints the cost report)\n",
		id, rec.State, bg.PID, dash(rec.Dashboard), id, id, logPath, id)
	return nil
}

// waitDetached waits until the background up's job runs (its record has
// left launching) and returns its record; nil when the user stopped
// waiting, an error when that up ended first.
func waitDetached(ctx context.Context, f *factory, opts *upOptions, bg detachedUp, ended <-chan error) (*job.Record, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	shown := false
	for {
		rec, _ := loadJob(ctx, f, bg.Job)
		if rec != nil && rec.Dashboard != "" && !shown && !opts.JSON {
			shown = true
			fmt.Fprintf(f.io.ErrOut, "job %s: launching in the background (pid %d, log %s); dashboard %s\n", bg.Job, bg.PID, bg.Log, rec.Dashboard)
		}
		if rec != nil && rec.State != job.StateLaunching {
			return rec, nil
		}
		select {
		case err := <-ended:
			tail, _ := os.ReadFile(bg.Log)
			if len(tail) > 2000 {
				tail = tail[len(tail)-2000:]
			}
			return nil, fmt.Errorf("job %s: up ended before the job ran (%v); its output (%s) ends:\n%s", bg.Job, err, bg.Log, tail)
		case <-ctx.Done():
			// The background up is on its own; the user stopped waiting.
			fmt.Fprintf(f.io.ErrOut, "job %s: still launching in the background; `vastfleet down %s` stops it\n", bg.Job, bg.Job)
			return nil, nil
		case <-tick.C:
		}
	}
}

// stopJobRun asks a job's running up (this or another terminal's, or a
// detached one) to finish as on Ctrl+C, and waits for it to end. It
// reports whether there was one.
func stopJobRun(ctx context.Context, f *factory, rec *jobRecord) (bool, error) {
	if rec.PID <= 0 || !jobRunAlive(f, rec.ID) {
		return false, nil
	}
	fmt.Fprintf(f.io.ErrOut, "job %s: asking its up (pid %d) to collect, destroy and report\n", rec.ID, rec.PID)
	if err := procgroup.Signal(rec.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return true, fmt.Errorf("job %s: signalling its up (pid %d): %w", rec.ID, rec.PID, err)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for jobRunAlive(f, rec.ID) {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-tick.C:
		}
	}
	return true, nil
}
