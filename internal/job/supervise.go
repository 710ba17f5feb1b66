package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/filelock"
	"github.com/vastfleet/vastfleet/internal/procgroup"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// A job's up process holds jobs/<job>/up.lock (flock) for as long as it
// runs; the kernel drops it when the process ends, however it ends. So
// "is this job's up alive?" never trusts a recorded pid that may have
// been reused: down asks the lock, and only then signals the pid.
const upLockFile = "up.lock"

// NewID names a job (and its fleet) after its task's name and the time.
func NewID(name string) string {
	if name == "" {
		name = "job"
	}
	return name + "-" + time.Now().UTC().Format("20060102-150405")
}

// Dir is the job's directory under jobsDir (logs, lock, exports), made if
// need be.
func Dir(jobsDir, id string) (string, error) {
	d := filepath.Join(jobsDir, id)
	return d, os.MkdirAll(d, 0o700)
}

// LockRun takes the job's up lock, or says (a usage error) who holds it.
func LockRun(jobsDir, id string) (release func(), err error) {
	d, err := Dir(jobsDir, id)
	if err != nil {
		return nil, err
	}
	fh, err := filelock.Acquire(filepath.Join(d, upLockFile))
	if errors.Is(err, filelock.ErrBusy) {
		return nil, usage.Error{Err: fmt.Errorf("job %s: another `vastfleet up` runs it (stop it with `vastfleet down %s`)", id, id)}
	}
	if err != nil {
		return nil, err
	}
	return func() { filelock.Release(fh) }, nil
}

// RunAlive reports whether an up process still holds the job's lock.
func RunAlive(jobsDir, id string) bool {
	release, err := LockRun(jobsDir, id)
	if err != nil {
		return true
	}
	release()
	return false
}

// Detached is a job's background up, as `up --detach` reports it.
type Detached struct {
	Job       string `json:"job"`
	State     string `json:"state"`
	Dashboard string `json:"dashboard"`
	PID       int    `json:"pid"`
	Log       string `json:"log"`
}

// DetachOptions say how to start a job's background up.
type DetachOptions struct {
	JobsDir, ID string
	// Exe and Args are the up to run in the background.
	Exe  string
	Args []string
	// Load reads the job's record (nil while it has none).
	Load func(ctx context.Context, id string) (*Record, error)
	// ErrOut hears how the wait goes; Quiet leaves out the dashboard line.
	ErrOut io.Writer
	Quiet  bool
}

// Detach starts the job's up as a background process in a session of its
// own (no terminal to lose), with its output in jobs/<job>/up.log. That
// process is the job's supervisor: it keeps the coordinator (and, on the
// simulator, the market and its machines) alive, watches, collects,
// destroys and reports as a foreground up would. Detach returns once the
// job runs, nil when ctx ended the wait first, or an error when up ended
// early.
func Detach(ctx context.Context, o DetachOptions) (*Detached, error) {
	d, err := Dir(o.JobsDir, o.ID)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(d, "up.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(o.Exe, o.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	procgroup.Detach(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the job's background up: %w", err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	bg := &Detached{Job: o.ID, PID: cmd.Process.Pid, Log: logPath}
	rec, err := waitDetached(ctx, o, bg, ended)
	if rec == nil || err != nil {
		return nil, err
	}
	bg.State, bg.Dashboard = rec.State, rec.Dashboard
	return bg, nil
}

// waitDetached waits until the background up's job runs (its record has
// left launching) and returns its record; nil when the user stopped
// waiting, an error when that up ended first.
func waitDetached(ctx context.Context, o DetachOptions, bg *Detached, ended <-chan error) (*Record, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	shown := false
	for {
		rec, _ := o.Load(ctx, bg.Job)
		if rec != nil && rec.Dashboard != "" && !shown && !o.Quiet {
			shown = true
			fmt.Fprintf(o.ErrOut, "job %s: launching in the background (pid %d, log %s); dashboard %s\n", bg.Job, bg.PID, bg.Log, rec.Dashboard)
		}
		if rec != nil && rec.State != StateLaunching {
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
			fmt.Fprintf(o.ErrOut, "job %s: still launching in the background; `vastfleet down %s` stops it\n", bg.Job, bg.Job)
			return nil, nil
		case <-tick.C:
		}
	}
}

// StopRun asks a job's running up (this or another terminal's, or a
// detached one) to finish as on Ctrl+C, saying so on w, and waits for it
// to end. It reports whether there was one.
func StopRun(ctx context.Context, jobsDir string, rec *Record, w io.Writer) (bool, error) {
	if rec.PID <= 0 || !RunAlive(jobsDir, rec.ID) {
		return false, nil
	}
	fmt.Fprintf(w, "job %s: asking its up (pid %d) to collect, destroy and report\n", rec.ID, rec.PID)
	if err := procgroup.Signal(rec.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return true, fmt.Errorf("job %s: signalling its up (pid %d): %w", rec.ID, rec.PID, err)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for RunAlive(jobsDir, rec.ID) {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-tick.C:
		}
	}
	return true, nil
}

// EndByItsUp has the job's running up, if one runs it (detached, or in
// another terminal), end it: that up holds the coordinator with the
// findings and items, and the market's lock. It returns the job's record
// as it is now, and the report that up saved once the job is done (nil
// when no up ran it, or it left the job unfinished).
func EndByItsUp(ctx context.Context, recs *Records, rec *Record, w io.Writer) (*Record, *Report, error) {
	stopped, err := StopRun(ctx, recs.Dir, rec, w)
	if err != nil || !stopped {
		return rec, nil, err
	}
	if rec, err = recs.Load(ctx, rec.ID); err != nil {
		return nil, nil, err
	}
	if rep, ok := SavedReport(recs, rec.ID); ok && rec.State == StateDone {
		return rec, rep, nil
	}
	return rec, nil, nil
}

// Select is the one job named, or every job when id is "".
func Select(ctx context.Context, recs *Records, id string) ([]*Record, error) {
	if id == "" {
		return recs.List(ctx)
	}
	rec, err := recs.Find(ctx, id)
	if err != nil {
		return nil, err
	}
	return []*Record{rec}, nil
}

// BackgroundArgs are the arguments of the background up that `up
// --detach` (args) starts: the same, less --detach, naming the job id.
func BackgroundArgs(args []string, id string) []string {
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		return a == "--detach" || strings.HasPrefix(a, "--detach=")
	})
	return append(args, "--job-id", id)
}

// WriteText says where the detached job runs and how to follow and stop
// it.
func (bg *Detached) WriteText(w io.Writer) {
	id := bg.Job
	fmt.Fprintf(w, "job %s is %s in the background (pid %d)\n  dashboard  %s\n  follow     vastfleet status %s; vastfleet logs %s; its up's output: %s\n  stop       vastfleet down %s  (collects, destroys, prints the cost report)\n",
		id, bg.State, bg.PID, cmdutil.Dash(bg.Dashboard), id, id, bg.Log, id)
}
