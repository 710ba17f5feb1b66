package replica

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func openApp(t *testing.T, p string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+p+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, state TEXT)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestReplicateAndRestore: a data dir's database rows and its other files
// (a key with mode 0600, a job record in a subdirectory) written while it
// is replicated come back in an empty directory, the market's own
// directory and Litestream's metadata do not, and a file removed before
// the flush is not brought back.
func TestReplicateAndRestore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir, rep := t.TempDir(), "file://"+t.TempDir()
	app := openApp(t, filepath.Join(dir, "state.db"))
	defer app.Close()
	os.MkdirAll(filepath.Join(dir, "keys"), 0o700)
	os.WriteFile(filepath.Join(dir, "keys", "fleet"), []byte("-----BEGIN KEY-----\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "gone.txt"), []byte("soon removed"), 0o644)
	os.MkdirAll(filepath.Join(dir, "sim"), 0o755)
	os.WriteFile(filepath.Join(dir, "sim", "market.json"), []byte("{}"), 0o644)

	r, err := Start(ctx, dir, rep, []string{"state.db"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := app.Exec(`INSERT INTO jobs VALUES (?, 'running')`, id); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "jobs", "a"), 0o755)
	os.WriteFile(filepath.Join(dir, "jobs", "a", "job.json"), []byte(`{"id":"a"}`), 0o644)
	os.Remove(filepath.Join(dir, "gone.txt"))
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	to := filepath.Join(t.TempDir(), "restored")
	if err := Restore(ctx, to, rep, []string{"state.db"}, nil); err != nil {
		t.Fatal(err)
	}
	got := openApp(t, filepath.Join(to, "state.db"))
	defer got.Close()
	var n int
	if err := got.QueryRow(`SELECT count(*) FROM jobs WHERE state = 'running'`).Scan(&n); err != nil || n != 3 {
		t.Errorf("restored %d running jobs (%v), want 3", n, err)
	}
	if b, err := os.ReadFile(filepath.Join(to, "jobs", "a", "job.json")); err != nil || string(b) != `{"id":"a"}` {
		t.Errorf("job record: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(to, "keys", "fleet")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key came back as %v (%v), want mode 0600", fi, err)
	}
	for _, not := range []string{"gone.txt", filepath.Join("sim", "market.json")} {
		if _, err := os.Stat(filepath.Join(to, not)); err == nil {
			t.Errorf("%s was restored", not)
		}
	}
	meta, _ := filepath.Glob(filepath.Join(to, "*-litestream"))
	if len(meta) != 0 {
		t.Errorf("Litestream's metadata restored as files: %v", meta)
	}

	// A restore never overwrites a data dir, and an empty replica is
	// named as such.
	if err := Restore(ctx, dir, rep, []string{"state.db"}, nil); err == nil || !strings.Contains(err.Error(), "already holds state.db") {
		t.Errorf("restore over a data dir: %v", err)
	}
	empty := "file://" + t.TempDir()
	if err := Restore(ctx, filepath.Join(t.TempDir(), "x"), empty, []string{"state.db"}, nil); err == nil || !strings.Contains(err.Error(), "holds no replica") {
		t.Errorf("restore from an empty replica: %v", err)
	}
	if _, err := Start(ctx, t.TempDir(), "s3://bucket/path", nil, nil); err == nil || !strings.Contains(err.Error(), "file:///PATH") {
		t.Errorf("an s3 replica: %v", err)
	}
}

// TestWaitReplicatesEachCommit: a row committed and then waited for is in
// the replica at once, with no flush and the replicator still running (as
// when the machine dies next): a restore taken right after the last wait
// holds every row. Without the waits the restore misses the last rows
// (Litestream's own sync comes once a second). Logs the wait's latency,
// the price of an acknowledgement that outlives the machine.
func TestWaitReplicatesEachCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const rows = 40
	run := func(wait bool) (restored int, lat []time.Duration) {
		dir, rep := t.TempDir(), "file://"+t.TempDir()
		app := openApp(t, filepath.Join(dir, "coord.db"))
		defer app.Close()
		r, err := Start(ctx, dir, rep, []string{"coord.db"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(context.WithoutCancel(ctx))
		for i := range rows {
			if _, err := app.Exec(`INSERT INTO jobs VALUES (?, 'done')`, fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
			if wait {
				start := time.Now()
				if err := r.Wait(ctx, "coord.db"); err != nil {
					t.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
		}
		to := filepath.Join(t.TempDir(), "restored")
		if err := Restore(ctx, to, rep, []string{"coord.db"}, nil); err != nil {
			if !wait && strings.Contains(err.Error(), "holds no replica") {
				return 0, nil // nothing had reached it yet
			}
			t.Fatal(err)
		}
		got := openApp(t, filepath.Join(to, "coord.db"))
		defer got.Close()
		if err := got.QueryRow(`SELECT count(*) FROM jobs`).Scan(&restored); err != nil {
			t.Fatal(err)
		}
		return restored, lat
	}
	n, lat := run(true)
	if n != rows {
		t.Errorf("restored right after the last wait: %d of %d rows", n, rows)
	}
	slices.Sort(lat)
	t.Logf("Wait on a file:// replica, %d commits: p50 %v, p99 %v, max %v", len(lat),
		lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	if _, err := (&Replicator{}).waitFor("state.db"); err == nil {
		t.Errorf("a database not replicated was waited for")
	}
	without, _ := run(false)
	t.Logf("without the waits, the same restore held %d of %d rows", without, rows)
}
