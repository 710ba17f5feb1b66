package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vastfleet/vastfleet/internal/filelock"
)

// LockFileName is the writer lock's name inside the data directory.
const LockFileName = "vastfleet.lock"

// ErrLocked is wrapped by the *LockedError AcquireLock returns when another
// vastfleet holds the lock.
var ErrLocked = errors.New("locked by another vastfleet")

// LockHolder is what the lock file says about the process holding it.
type LockHolder struct {
	PID      int    `json:"pid"`
	Hostname string `json:"hostname"`
	Command  string `json:"command"`
}

// LockedError names who holds the lock.
type LockedError struct {
	Path   string
	Holder LockHolder // zero when the file could not be read
	Since  string     // the holder's start, as local HH:MM:SS; "" if unknown
}

func (e *LockedError) Error() string {
	var who []string
	if e.Holder.PID > 0 {
		who = append(who, fmt.Sprintf("pid %d", e.Holder.PID))
	}
	if h, _ := os.Hostname(); e.Holder.Hostname != "" && e.Holder.Hostname != h {
		who = append(who, "on "+e.Holder.Hostname)
	}
	if e.Holder.Command != "" {
		who = append(who, fmt.Sprintf("%q", e.Holder.Command))
	}
	if e.Since != "" {
		who = append(who, "since "+e.Since)
	}
	desc := "another vastfleet"
	if len(who) > 0 {
		desc += " (" + strings.Join(who, ", ") + ")"
	}
	return fmt.Sprintf("%s holds %s; wait for it or stop it", desc, e.Path)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// Lock is a held writer lock; Unlock releases it.
type Lock struct {
	dir  *os.File // the data directory, flock'd: the lock itself
	f    *os.File // the holder file: only names the holder
	path string
}

// AcquireLock takes the exclusive writer lock on the data directory dir for
// the whole process's work, without waiting. holder is the command line to
// show to whoever is refused. The lock is an flock held by the kernel, so it
// is released when its process dies: a stale holder file from a killed
// process means nothing.
//
// The flock is on the directory itself (opened read-only), not on
// dir/vastfleet.lock: a file can be deleted while locked, and the next
// process would then create and lock a new inode under the same name and
// drive the same fleet. The directory cannot be deleted while it holds the
// store. The file only names the holder (pid, host, command; its mtime is
// the start time) for the error message, so the store reads no clock. A
// second AcquireLock in the same process is refused too (each open has its
// own file description).
func AcquireLock(dir, holder string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	path := filepath.Join(dir, LockFileName)
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	if err := filelock.TryLock(d); err != nil {
		d.Close()
		if errors.Is(err, filelock.ErrBusy) {
			return nil, readHolder(path)
		}
		return nil, fmt.Errorf("store: lock %s: %w", dir, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		err = f.Chmod(0o600) // a file left by an older vastfleet may be 0644
	}
	if err == nil {
		host, _ := os.Hostname()
		b, _ := json.Marshal(LockHolder{PID: os.Getpid(), Hostname: host, Command: holder})
		err = writeHolder(f, append(b, '\n'))
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		filelock.Unlock(d)
		d.Close()
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	return &Lock{dir: d, f: f, path: path}, nil
}

func writeHolder(f *os.File, b []byte) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Sync()
}

func readHolder(path string) error {
	e := &LockedError{Path: path}
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &e.Holder) != nil {
		// The holder may be between taking the lock and writing its name.
		return e
	}
	if fi, err := os.Stat(path); err == nil {
		e.Since = fi.ModTime().Format("15:04:05")
	}
	return e
}

// Path is the holder file's path.
func (l *Lock) Path() string { return l.path }

// Unlock releases the lock. It is safe to call more than once.
func (l *Lock) Unlock() error {
	if l == nil || l.dir == nil {
		return nil
	}
	_ = l.f.Truncate(0) // no stale holder name for the next reader
	_ = l.f.Close()
	err := filelock.Unlock(l.dir)
	if cerr := l.dir.Close(); err == nil {
		err = cerr
	}
	l.dir, l.f = nil, nil
	return err
}

// Held says whether a writer holds dir's lock now (a probe that takes it
// and gives it back at once).
func Held(dir string) bool {
	l, err := AcquireLock(dir, "probe")
	if err != nil {
		return errors.Is(err, ErrLocked)
	}
	l.Unlock()
	return false
}

// AcquireLockBehind is AcquireLock for a command that may find the lock
// held by a background pass (a bid watcher's or a coordinator's listing,
// named in passes), which holds it for one listing at a time: the command
// waits for it, calling pause between tries, which waits a moment and
// says whether to try again. Held by anyone else, the lock is refused at
// once.
func AcquireLockBehind(ctx context.Context, dir, holder string, passes []string, pause func(context.Context) (bool, error)) (*Lock, error) {
	for {
		l, err := AcquireLock(dir, holder)
		var held *LockedError
		if err == nil || !errors.As(err, &held) || !slices.Contains(passes, held.Holder.Command) {
			return l, err
		}
		again, perr := pause(ctx)
		if perr != nil {
			return nil, perr
		}
		if !again {
			return nil, err
		}
	}
}
