package server

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/server/pgtest"
)

// terminateLeases ends the PostgreSQL sessions that hold the server's
// leases, as the death of the process holding them does.
func terminateLeases(t *testing.T, dsn string) {
	t.Helper()
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND classid = $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, leaseClass); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseOnPostgres: a lease is one replica's at a time; once its
// session ends (the process died) another replica takes it, and the
// first learns it lost it.
func TestLeaseOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	var dbs [2]*DB
	for i := range dbs {
		db, err := OpenPostgres(ctx, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	a, ok, err := dbs[0].TryLease(ctx, "job:x", 20*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("the first lease: %v %v", ok, err)
	}
	if _, ok, err := dbs[1].TryLease(ctx, "job:x", time.Second); ok || err != nil {
		t.Fatalf("a second replica took a held lease: %v %v", ok, err)
	}
	other, ok, err := dbs[1].TryLease(ctx, "job:y", time.Second)
	if !ok || err != nil {
		t.Fatalf("another job's lease: %v %v", ok, err)
	}
	other.Release()
	terminateLeases(t, dsn)
	select {
	case <-a.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("the lease's holder did not learn its session ended")
	}
	// Free once the ended session's backend has exited.
	waitFor(t, func() bool {
		b, ok, err := dbs[1].TryLease(ctx, "job:x", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			b.Release()
		}
		return ok
	})
	a.Release()
	// Released, it is free again.
	c, ok, err := dbs[0].TryLease(ctx, "job:x", time.Second)
	if !ok || err != nil {
		t.Fatalf("a released lease: %v %v", ok, err)
	}
	c.Release()
}

// TestFailoverOnPostgres: two server replicas share a PostgreSQL and a
// data dir. The job runs on one. When that one's database sessions end
// (as when its process dies), its up stops, and a replica (either) takes
// the job over once it has; when the replica running it stops, the other
// takes it over. Each resumes it; the up never runs on both at once, and
// the job's log goes on in one file either replica serves.
func TestFailoverOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	var (
		mu      sync.Mutex
		events  []string
		running atomic.Int32 // ups running, on either replica
		states  sync.Map
	)
	note := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	ran := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(events) }
	release := make(chan struct{})
	newReplica := func(name string) *Server {
		db, err := OpenPostgres(ctx, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		run := func(ctx context.Context, args []string, out, errOut io.Writer) int {
			if running.Add(1) > 1 {
				note("both ran")
			}
			defer running.Add(-1)
			note(name + " " + args[1])
			io.WriteString(errOut, name+" runs it\n")
			select {
			case <-release:
				return 0
			case <-ctx.Done():
				return 130
			}
		}
		srv := New(Config{DB: db, Run: run, Dir: dir, ResultsDir: filepath.Join(dir, "results"), Version: "v-test",
			Poll: 20 * time.Millisecond, Busy: func() bool { return running.Load() > 0 },
			JobState: func(ctx context.Context, id string) (string, error) {
				v, _ := states.Load(id)
				s, _ := v.(string)
				return s, nil
			}})
		if err := srv.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Stop)
		return srv
	}
	replicas := map[string]*Server{"a": newReplica("a")}
	tok, err := replicas["a"].cfg.DB.CreateToken(ctx, "ann", RoleOperator, 0)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(replicas["a"].Handler())
	t.Cleanup(ts.Close)
	c := &Client{URL: ts.URL, Token: tok, Version: "v-test"}
	id, err := c.Submit(ctx, "j", bundle(t), true)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(ran()) == 1 })
	states.Store(id, "running") // its up recorded it
	replicas["b"] = newReplica("b")
	waitFor(t, func() bool { return replicas["b"].job(id) != nil })

	// The sessions holding the leases end: the up stops, and is resumed.
	terminateLeases(t, dsn)
	waitFor(t, func() bool { return len(ran()) == 2 })
	// The replica running it stops: the other resumes it.
	holder := ran()[1][:1]
	other := map[string]string{"a": "b", "b": "a"}[holder]
	replicas[holder].Stop()
	waitFor(t, func() bool { return len(ran()) == 3 })
	close(release)
	last := replicas[other]
	waitFor(t, func() bool {
		row, _, err := last.cfg.DB.Job(ctx, id)
		return err == nil && row.State == JobEnded
	})
	want := []string{"a " + filepath.Join(dir, "jobs", id, "bundle", TaskName), holder + " --resume", other + " --resume"}
	if got := ran(); !slices.Equal(got, want) {
		t.Errorf("ran %q, want %q (never both at once)", got, want)
	}
	if row, _, _ := last.cfg.DB.Job(ctx, id); row.ExitCode != 0 {
		t.Errorf("exit %d", row.ExitCode)
	}
	// One log, followed from either replica: a's lines, the takeovers, the
	// last one's lines and the exit.
	b, ended, err := last.job(id).log.ReadFrom(0)
	if err != nil || !ended {
		t.Fatalf("the log: ended %v, %v", ended, err)
	}
	for _, want := range []string{"a runs it", "resuming it", other + " runs it", `"exit":0`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the log lacks %q:\n%s", want, b)
		}
	}
	fresh, err := openFrameLog(filepath.Join(dir, "jobs", id, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if b2, ended2, _ := fresh.ReadFrom(0); !ended2 || string(b2) != string(b) {
		t.Errorf("a replica starting now reads another log (ended %v):\n%s", ended2, b2)
	}
}
