// Package filelock holds exclusive advisory locks on open files, so that
// two processes never drive the same state: the store's data directory,
// the simulator's market, a job's up run, an agent's state directory.
//
// The lock belongs to the open file (flock on unix, LockFileEx on
// windows), not to the process: a second open of the same file is refused
// even in the same process, and the kernel releases the lock when its
// holder dies, so a lock never goes stale.
package filelock

import (
	"errors"
	"fmt"
	"os"
)

// ErrBusy is returned, wrapped, when another open file holds the lock.
var ErrBusy = errors.New("held by another process")

// TryLock takes the exclusive lock on f without waiting. It returns an
// error wrapping ErrBusy when another open file holds it.
func TryLock(f *os.File) error { return tryLock(f) }

// Unlock releases the lock TryLock took on f. Closing f releases it too.
func Unlock(f *os.File) error { return unlock(f) }

// Acquire opens path (creating it, mode 0600) and locks it without
// waiting; Release undoes both. The error wraps ErrBusy when another
// process holds the lock.
func Acquire(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := TryLock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

// Release unlocks and closes a file from Acquire.
func Release(f *os.File) error {
	err := Unlock(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
