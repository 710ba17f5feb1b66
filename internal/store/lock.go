package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	f    *os.File
	path string
}

// AcquireLock takes the exclusive writer lock dir/vastfleet.lock for the
// whole process's work, without waiting. holder is the command line to show
// to whoever is refused. The lock is an flock, so it is released by the OS
// when its process dies: a stale file from a killed process is free. A
// second AcquireLock in the same process is refused too.
//
// The file is never deleted (deleting a flock'd file lets two processes each
// lock a different inode). The holder's start time is the file's mtime,
// written when the lock was taken, so the store reads no clock.
func AcquireLock(dir, holder string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	path := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	busy, err := tryFlock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	if busy {
		f.Close()
		return nil, readHolder(path)
	}
	host, _ := os.Hostname()
	b, _ := json.Marshal(LockHolder{PID: os.Getpid(), Hostname: host, Command: holder})
	if err := writeHolder(f, append(b, '\n')); err != nil {
		unflock(f)
		f.Close()
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	return &Lock{f: f, path: path}, nil
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

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Unlock releases the lock. It is safe to call more than once.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0) // no stale holder name for the next reader
	err := unflock(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}
