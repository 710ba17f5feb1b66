package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/store"
)

// TestLaunchRefusedAfterLockFileDeleted is issue 9's two-drivers case: one
// process holds the data dir while the lock file is deleted under it; a
// `launch --resume` of the same fleet, and a new launch, must be refused
// and rent nothing.
func TestLaunchRefusedAfterLockFileDeleted(t *testing.T) {
	e := newEnv(t)
	e.ok("launch", "--count", "2", "--deadline", "30m", "--fleet", "f1", "-n", launchQuery)
	before := len(decode[[]map[string]any](t, e.ok("ls", "--json").out))

	held, err := store.AcquireLock(e.home, "vastfleet launch --fleet f1")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	if err := os.Remove(filepath.Join(e.home, store.LockFileName)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"launch", "--resume", "f1"},
		{"launch", "--count", "2", "--deadline", "30m", "--fleet", "f2", "-n", launchQuery},
	} {
		r := e.run(args...)
		if r.code != 1 || !strings.Contains(r.err, "another vastfleet") {
			t.Errorf("%v with the lock file deleted: exit %d, stderr %q; want refused", args, r.code, r.err)
		}
	}
	if after := len(decode[[]map[string]any](t, e.ok("ls", "--json").out)); after != before {
		t.Errorf("ls lists %d instances after the refused launches, %d before", after, before)
	}
	held.Unlock()
	e.ok("destroy", "--all", "--yes")
}
