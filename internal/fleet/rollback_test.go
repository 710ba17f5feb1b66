package fleet

import (
	"context"
	"os"
	"testing"

	"github.com/vastfleet/vastfleet/internal/store"
)

// TestLabelsUniqueAcrossRollback is issue 9's lost-WAL case: the store goes
// back to an earlier copy (restored backup, WAL deleted after a kill -9),
// so intent ids start again from an old value while the instances rented
// since keep running. Rentals after the rollback must not carry a label that
// a running instance already has, and reconcile must not adopt the running
// instances into the new intents that happen to share their ids.
func TestLabelsUniqueAcrossRollback(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	if _, err := e.m.Rent(ctx, e.rentReq(0)); err != nil {
		t.Fatal(err)
	}
	// Close checkpoints the WAL into the file: the copy is a full backup.
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	backup, err := os.ReadFile(e.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	e.st = reopen(t, e.dbPath)
	e.m = e.manager(e.client)
	for i := 1; i <= 3; i++ {
		if _, err := e.m.Rent(ctx, e.rentReq(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	// Roll back: the backup replaces the file and the WAL is gone.
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(e.dbPath + suffix)
	}
	if err := os.WriteFile(e.dbPath, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	e.st = reopen(t, e.dbPath)
	e.m = e.manager(e.client)
	var again []int64
	for i := 4; i <= 6; i++ {
		rec, err := e.m.Rent(ctx, e.rentReq(i))
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, rec.IntentID)
	}
	if again[0] != 2 {
		t.Fatalf("intent ids after the rollback start at %d, want 2 (the test no longer rolls back)", again[0])
	}
	seen := map[string]int64{}
	for _, s := range e.ours() {
		if prev, dup := seen[s.Label]; dup {
			t.Errorf("instances %d and %d both carry label %s", prev, s.ID, s.Label)
		}
		seen[s.Label] = s.ID
	}
	if len(seen) != 7 {
		t.Errorf("%d distinct labels among live instances, want 7", len(seen))
	}
	rep, err := e.m.Reconcile(ctx, ReconcileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Changes {
		if c.Kind == ChangeAdopted {
			t.Errorf("reconcile after the rollback adopted instance %d into intent %d", c.Instance, c.Intent)
		}
	}
	if len(rep.Orphans) != 3 {
		t.Errorf("reconcile found %d orphans, want the 3 instances rented before the rollback: %+v", len(rep.Orphans), rep.Orphans)
	}
}

func reopen(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
