package server

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
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

// cluster is server replicas on one PostgreSQL and one data dir, whose
// commands are faked: an up says which replica runs it and waits for
// release (or its context); any other command returns at once. Each
// command is noted as "REPLICA ARG1" (up's task file, or --resume), and
// "both ran" when two run at once.
type cluster struct {
	t       *testing.T
	dsn     string
	dir     string
	mu      sync.Mutex
	events  []string
	running atomic.Int32
	states  sync.Map
	release chan struct{}
	tokens  atomic.Int64
}

func newCluster(t *testing.T) *cluster {
	return &cluster{t: t, dsn: pgtest.DSN(t), dir: t.TempDir(), release: make(chan struct{})}
}

func (c *cluster) note(e string) { c.mu.Lock(); c.events = append(c.events, e); c.mu.Unlock() }

func (c *cluster) ran() []string { c.mu.Lock(); defer c.mu.Unlock(); return slices.Clone(c.events) }

func (c *cluster) replica(name string) *Server {
	t, ctx := c.t, context.Background()
	db, err := OpenPostgres(ctx, c.dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	run := func(ctx context.Context, args []string, out, errOut io.Writer) int {
		if c.running.Add(1) > 1 {
			c.note("both ran")
		}
		defer c.running.Add(-1)
		c.note(name + " " + args[0] + " " + args[1])
		if args[0] != "up" {
			return 0
		}
		io.WriteString(errOut, name+" runs it\n")
		select {
		case <-c.release:
			return 0
		case <-ctx.Done():
			return 130
		}
	}
	srv := New(Config{DB: db, Run: run, Dir: c.dir, ResultsDir: filepath.Join(c.dir, "results"), Version: "v-test",
		Poll: 20 * time.Millisecond, Busy: func() bool { return c.running.Load() > 0 },
		JobState: func(ctx context.Context, id string) (string, error) {
			v, _ := c.states.Load(id)
			s, _ := v.(string)
			return s, nil
		}})
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// client is an operator's client of srv.
func (c *cluster) client(srv *Server) *Client {
	tok, err := srv.cfg.DB.CreateToken(context.Background(), fmt.Sprint("op-", c.tokens.Add(1)), RoleOperator, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	c.t.Cleanup(ts.Close)
	return &Client{URL: ts.URL, Token: tok, Version: "v-test"}
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
	cl := newCluster(t)
	dir, ran := cl.dir, cl.ran
	replicas := map[string]*Server{"a": cl.replica("a")}
	c := cl.client(replicas["a"])
	id, err := c.Submit(ctx, "j", bundle(t), true)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(ran()) == 1 })
	cl.states.Store(id, "running") // its up recorded it
	replicas["b"] = cl.replica("b")
	waitFor(t, func() bool { return replicas["b"].job(id) != nil })

	// The sessions holding the leases end: the up stops, and is resumed.
	terminateLeases(t, cl.dsn)
	waitFor(t, func() bool { return len(ran()) == 2 })
	// The replica running it stops: the other resumes it.
	holder := ran()[1][:1]
	other := map[string]string{"a": "b", "b": "a"}[holder]
	replicas[holder].Stop()
	waitFor(t, func() bool { return len(ran()) == 3 })
	close(cl.release)
	last := replicas[other]
	waitFor(t, func() bool {
		row, _, err := last.cfg.DB.Job(ctx, id)
		return err == nil && row.State == JobEnded
	})
	want := []string{"a up " + filepath.Join(dir, "jobs", id, "bundle", TaskName), holder + " up --resume", other + " up --resume"}
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

// TestDownFromAnotherReplica: down, asked of a replica that does not run
// the job, stops the job's up on the replica running it (nodes kept) and
// then runs down itself: never beside the up. The client follows it to
// the end.
func TestDownFromAnotherReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := newCluster(t)
	a := cl.replica("a")
	id, err := cl.client(a).Submit(ctx, "j", bundle(t), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(cl.ran()) == 1 })
	cl.states.Store(id, "running")
	b := cl.replica("b")
	waitFor(t, func() bool { return b.job(id) != nil })
	var out, errOut bytes.Buffer
	code, err := cl.client(b).Run(ctx, []string{"down", id}, &out, &errOut)
	if err != nil || code != 0 {
		t.Fatalf("down from replica b: %d %v\n%s%s", code, err, out.String(), errOut.String())
	}
	want := []string{"a up " + filepath.Join(cl.dir, "jobs", id, "bundle", TaskName), "b down " + id}
	if got := cl.ran(); !slices.Equal(got, want) {
		t.Errorf("ran %q, want %q (never both at once)", got, want)
	}
	if row, _, _ := a.cfg.DB.Job(ctx, id); row.State != JobEnded || row.ExitCode != 0 {
		t.Errorf("the job after down: %+v", row)
	}
	if !strings.Contains(errOut.String(), "being ended from another replica") {
		t.Errorf("the client was not told the up stopped:\n%s", errOut.String())
	}
	// Neither replica runs it again.
	if got := len(cl.ran()); got != 2 {
		t.Errorf("ran %q after down", cl.ran())
	}
}

// TestASlowCheckIsNotALostLease: a lease's check that takes longer than
// its interval (a loaded machine) keeps the lease; a check that fails
// loses it. A slow check read as a loss stopped a job's up with no other
// replica to take it (TestDownFromAnotherReplica failed so under load).
func TestASlowCheckIsNotALostLease(t *testing.T) {
	t.Parallel()
	every := 5 * time.Millisecond
	var fail atomic.Bool
	checks := make(chan struct{}, 100)
	l := &Lease{lost: make(chan struct{}), stop: make(chan struct{})}
	go l.watch(every, func(ctx context.Context) error {
		select {
		case checks <- struct{}{}:
		default:
		}
		if fail.Load() {
			return errors.New("connection reset by peer")
		}
		select { // slower than the interval, well within the timeout
		case <-time.After(4 * every):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	for range 5 {
		select {
		case <-checks:
		case <-l.Lost():
			t.Fatal("a slow check lost the lease")
		}
	}
	fail.Store(true)
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("a failed check kept the lease")
	}
}
