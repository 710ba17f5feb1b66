package filelock

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestSecondHolderIsRefusedUntilRelease(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.lock")
	first, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	// Each open is its own holder, in this process as in another.
	if _, err := Acquire(path); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Acquire = %v, want ErrBusy", err)
	}
	if err := Release(first); err != nil {
		t.Fatal(err)
	}
	second, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	Release(second)
}

func TestClosingReleases(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.lock")
	f, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // as the kernel does when the holder dies
	g, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after the holder closed: %v", err)
	}
	Release(g)
}

func TestUnlockThenRelock(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("windows locks files, not directories")
	}
	dir := t.TempDir()
	// The store locks its directory itself, opened read-only.
	a, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := TryLock(a); err != nil {
		t.Fatal(err)
	}
	if err := TryLock(b); !errors.Is(err, ErrBusy) {
		t.Fatalf("TryLock on a locked directory = %v, want ErrBusy", err)
	}
	if err := Unlock(a); err != nil {
		t.Fatal(err)
	}
	if err := TryLock(b); err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
}
