// Package pgtest gives tests a real PostgreSQL: the one named by
// VASTFLEET_TEST_POSTGRES (a DSN whose user may create databases), else a
// throwaway cluster started from the initdb and pg_ctl binaries on PATH,
// in /usr/local/bin or where Debian's postgresql package keeps them. Each
// caller gets a fresh database in it. Without PostgreSQL a test skips,
// unless VASTFLEET_REQUIRE_POSTGRES is set (CI installs it: there a
// missing one is a failure, not a skip that would hide the suite).
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// cluster is one PostgreSQL a test binary shares, started at its first
// database.
type cluster struct {
	once sync.Once
	dsn  string // of the maintenance database
	err  error
	stop func()
	n    atomic.Int64
}

// fast runs with fsync off (tests of behaviour); durable syncs each
// commit, as a production server does (benchmarks).
var fast, durable cluster

// DSN is a fresh, empty database in the shared PostgreSQL (fsync off);
// the test skips (or fails, under VASTFLEET_REQUIRE_POSTGRES) when there
// is none.
func DSN(t testing.TB) string { return fast.database(t, false) }

// DurableDSN is DSN in a PostgreSQL that syncs every commit to disk, for
// timings to hold up against SQLite's synchronous=FULL.
func DurableDSN(t testing.TB) string { return durable.database(t, true) }

func (c *cluster) database(t testing.TB, fsync bool) string {
	t.Helper()
	c.once.Do(func() { c.dsn, c.stop, c.err = start(fsync) })
	if c.err != nil {
		if os.Getenv("VASTFLEET_REQUIRE_POSTGRES") != "" {
			t.Fatalf("PostgreSQL: %v", c.err)
		}
		t.Skipf("PostgreSQL: %v", c.err)
	}
	admin, err := sql.Open("pgx", c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := fmt.Sprintf("vf_test_%d_%d_%d", os.Getpid(), map[bool]int{false: 0, true: 1}[fsync], c.n.Add(1))
	if _, err := admin.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return strings.Replace(c.dsn, "/postgres?", "/"+name+"?", 1)
}

// Stop stops the clusters DSN and DurableDSN started, if they did; a
// package's TestMain calls it after its tests.
func Stop() {
	for _, c := range []*cluster{&fast, &durable} {
		if c.stop != nil {
			c.stop()
		}
	}
}

func binary(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := filepath.Join("/usr/local/bin", name); exists(p) {
		return p
	}
	// Debian's postgresql package keeps them off PATH.
	if ps, _ := filepath.Glob(filepath.Join("/usr/lib/postgresql", "*", "bin", name)); len(ps) > 0 {
		return ps[len(ps)-1]
	}
	return ""
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func start(fsync bool) (string, func(), error) {
	if dsn := os.Getenv("VASTFLEET_TEST_POSTGRES"); dsn != "" {
		return dsn, func() {}, nil
	}
	initdb, pgctl := binary("initdb"), binary("pg_ctl")
	if initdb == "" || pgctl == "" {
		return "", nil, errors.New("no initdb and pg_ctl (set VASTFLEET_TEST_POSTGRES to a DSN)")
	}
	dir, err := os.MkdirTemp("", "vastfleet-pg-")
	if err != nil {
		return "", nil, err
	}
	// PostgreSQL refuses to run as root: then it runs as nobody.
	as := func(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }
	if os.Geteuid() == 0 {
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			return "", nil, errors.New("running as root without runuser: cannot start PostgreSQL")
		}
		if err := os.Chown(dir, 65534, 65534); err != nil {
			return "", nil, err
		}
		as = func(name string, args ...string) *exec.Cmd {
			return exec.Command(runuser, append([]string{"-u", "nobody", "--", name}, args...)...)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	data := filepath.Join(dir, "data")
	if out, err := as(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// Parallel tests each hold a few connections to databases of their
	// own: more than the default 100 at once.
	opts := fmt.Sprintf("-p %d -k %s -h 127.0.0.1 -c max_connections=300", port, dir)
	if !fsync {
		opts += " -F"
	}
	if out, err := as(pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start").CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	stop := func() {
		as(pgctl, "-D", data, "-m", "immediate", "-w", "stop").Run()
		os.RemoveAll(dir)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), stop, nil
}
