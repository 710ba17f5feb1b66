package cli

import (
	"context"
	"errors"
	"testing"

	"github.com/vastfleet/vastfleet/internal/store"
)

// TestCommandsWaitForABidWatchersListing: a command that finds the data
// dir's lock held by a bid watcher's listing waits for it instead of
// failing, and gives up at its bound; held by another command, it is
// refused at once.
func TestCommandsWaitForABidWatchersListing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	watcher, err := store.AcquireLock(dir, bidWatchHolder)
	if err != nil {
		t.Fatal(err)
	}
	pauses := 0
	// The watcher's listing ends during the command's third wait.
	l, err := acquireLockPausing(ctx, dir, holderName("destroy", "--all"), func(context.Context) (bool, error) {
		if pauses++; pauses == 3 {
			watcher.Unlock()
		}
		return true, nil
	})
	if err != nil || pauses != 3 {
		t.Fatalf("a command behind a bid watcher's listing: %v after %d waits", err, pauses)
	}
	pauses = 0
	_, err = acquireLockPausing(ctx, dir, holderName("launch"), func(context.Context) (bool, error) {
		pauses++
		return true, nil
	})
	if !errors.Is(err, store.ErrLocked) || pauses != 0 {
		t.Fatalf("a command behind another command: %v after %d waits, want refused at once", err, pauses)
	}
	l.Unlock()
	if watcher, err = store.AcquireLock(dir, bidWatchHolder); err != nil {
		t.Fatal(err)
	}
	defer watcher.Unlock()
	_, err = acquireLockPausing(ctx, dir, holderName("launch"), func(context.Context) (bool, error) {
		pauses++
		return pauses < 5, nil
	})
	if !errors.Is(err, store.ErrLocked) || pauses != 5 {
		t.Fatalf("a watcher that never lets go: %v after %d waits, want refused at the bound", err, pauses)
	}
}
