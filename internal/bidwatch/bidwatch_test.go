package bidwatch

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/store"
)

// TestWriterHoldsTheLockForOneListingAndEndsWithItsDataDir: a watcher's
// writer holds the data dir's lock under Holder (so that a command waits
// for it) only until released, and ends the watch once the market was
// stopped or the data dir is gone.
func TestWriterHoldsTheLockForOneListingAndEndsWithItsDataDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	stopped := false
	d := Deps{Dir: dir, MarketStopped: func(context.Context) bool { return stopped }}
	w := d.Writer()
	m, release, err := w(ctx)
	if err != nil || m == nil {
		t.Fatalf("a writer on a live data dir: %v", err)
	}
	var held *store.LockedError
	if _, err := store.AcquireLock(dir, "vastfleet launch"); !errors.As(err, &held) || held.Holder.Command != Holder {
		t.Fatalf("during a listing the lock is %v, want held by %q", err, Holder)
	}
	release()
	l, err := store.AcquireLock(dir, "vastfleet launch")
	if err != nil {
		t.Fatalf("after a listing the lock is still held: %v", err)
	}
	if _, _, err := w(ctx); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("a writer behind a command: %v, want the lock refused", err)
	}
	l.Unlock()
	stopped = true
	if _, _, err := w(ctx); !errors.Is(err, fleet.ErrWatchOver) {
		t.Fatalf("a writer after the market stopped: %v, want %v", err, fleet.ErrWatchOver)
	}
	stopped = false
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w(ctx); !errors.Is(err, fleet.ErrWatchOver) {
		t.Fatalf("a writer after the data dir went: %v, want %v", err, fleet.ErrWatchOver)
	}
}
