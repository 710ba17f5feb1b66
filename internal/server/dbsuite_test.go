package server

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
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
)

// opener makes a fresh, empty server database on clk.
type opener func(t *testing.T, clk clock.Clock) *DB

func openSQLite(t *testing.T, clk clock.Clock) *DB {
	t.Helper()
	db, err := OpenDB(context.Background(), filepath.Join(t.TempDir(), "serve.db"), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// The one PostgreSQL the package's tests share: VASTFLEET_TEST_POSTGRES
// (a DSN whose user may create databases), else one started from the
// initdb, pg_ctl and postgres binaries on PATH or in /usr/local/bin, in a
// temporary directory, for as long as the tests run.
var pg struct {
	once sync.Once
	dsn  string // of the maintenance database
	err  error
	stop func()
	n    atomic.Int64
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pg.stop != nil {
		pg.stop()
	}
	os.Exit(code)
}

func pgBinary(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := filepath.Join("/usr/local/bin", name); fileExists(p) {
		return p
	}
	// Debian's postgresql package keeps them off PATH.
	if ps, _ := filepath.Glob(filepath.Join("/usr/lib/postgresql", "*", "bin", name)); len(ps) > 0 {
		return ps[len(ps)-1]
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func startPostgres() (string, func(), error) {
	if dsn := os.Getenv("VASTFLEET_TEST_POSTGRES"); dsn != "" {
		return dsn, func() {}, nil
	}
	initdb, pgctl := pgBinary("initdb"), pgBinary("pg_ctl")
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
	opts := fmt.Sprintf("-p %d -k %s -h 127.0.0.1 -F", port, dir)
	if out, err := as(pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start").CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	stop := func() {
		as(pgctl, "-D", data, "-m", "immediate", "-w", "stop").Run()
		os.RemoveAll(dir)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), stop, nil
}

// openPostgres is a fresh database in the shared PostgreSQL.
func openPostgres(t *testing.T, clk clock.Clock) *DB {
	t.Helper()
	pg.once.Do(func() { pg.dsn, pg.stop, pg.err = startPostgres() })
	if pg.err != nil {
		if os.Getenv("VASTFLEET_REQUIRE_POSTGRES") != "" {
			// CI installs PostgreSQL: there a missing one is a failure,
			// not a skip that would hide the suite.
			t.Fatalf("PostgreSQL: %v", pg.err)
		}
		t.Skipf("PostgreSQL: %v", pg.err)
	}
	ctx := context.Background()
	admin, err := sql.Open("pgx", pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := fmt.Sprintf("vf_test_%d_%d", os.Getpid(), pg.n.Add(1))
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	dsn := strings.Replace(pg.dsn, "/postgres?", "/"+name+"?", 1)
	db, err := OpenPostgres(ctx, dsn, clk)
	if err != nil {
		t.Fatal(err)
	}
	// A second open (another server starting) finds it migrated.
	again, err := OpenPostgres(ctx, dsn, clk)
	if err != nil {
		t.Fatalf("opening a migrated database: %v", err)
	}
	again.Close()
	t.Cleanup(func() { db.Close() })
	return db
}

// TestDBConformance runs the server database's suite on SQLite and on
// PostgreSQL.
func TestDBConformance(t *testing.T) {
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dbSuite(t, open)
		})
	}
}

func dbSuite(t *testing.T, open opener) {
	ctx := context.Background()
	t.Run("tokens", func(t *testing.T) {
		clk := clock.NewManual(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		db := open(t, clk)
		op, err := db.CreateToken(ctx, "ann", RoleOperator, 0)
		if err != nil {
			t.Fatal(err)
		}
		view, err := db.CreateToken(ctx, "vic", RoleViewer, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(op, tokenPrefix) || len(op) != len(tokenPrefix)+43 || op == view {
			t.Errorf("tokens %q %q", op, view)
		}
		if _, err := db.CreateToken(ctx, "ann", RoleViewer, 0); err == nil || !strings.Contains(err.Error(), "exists") {
			t.Errorf("a second token named ann: %v", err)
		}
		if _, err := db.CreateToken(ctx, "root", "admin", 0); err == nil {
			t.Error("role admin accepted")
		}
		if id, err := db.Authenticate(ctx, op); err != nil || id != (Identity{"ann", RoleOperator}) {
			t.Errorf("ann: %+v %v", id, err)
		}
		if id, err := db.Authenticate(ctx, view); err != nil || id != (Identity{"vic", RoleViewer}) {
			t.Errorf("vic: %+v %v", id, err)
		}
		for tok, want := range map[string]error{"": ErrNoToken, "vfs_x": ErrUnknownToken, op + "x": ErrUnknownToken} {
			if _, err := db.Authenticate(ctx, tok); !errors.Is(err, want) {
				t.Errorf("token %q: %v, want %v", tok, err, want)
			}
		}
		if err := db.RevokeToken(ctx, "ann"); err != nil {
			t.Fatal(err)
		}
		if err := db.RevokeToken(ctx, "ann"); err == nil {
			t.Error("revoked twice")
		}
		if _, err := db.Authenticate(ctx, op); !errors.Is(err, ErrRevoked) {
			t.Errorf("revoked: %v", err)
		}
		clk.Advance(time.Hour - time.Second)
		if _, err := db.Authenticate(ctx, view); err != nil {
			t.Errorf("a second before expiry: %v", err)
		}
		clk.Advance(time.Second)
		if _, err := db.Authenticate(ctx, view); !errors.Is(err, ErrExpired) {
			t.Errorf("at expiry: %v", err)
		}
		list, err := db.Tokens(ctx)
		if err != nil || len(list) != 2 || list[0].Name != "ann" || list[0].RevokedAt == "" || list[1].ExpiresAt != "2026-01-02T04:04:05Z" {
			t.Errorf("tokens: %+v %v", list, err)
		}
	})
	t.Run("audit", func(t *testing.T) {
		clk := clock.NewManual(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		db := open(t, clk)
		for i, a := range []string{"submit", "destroy", "down"} {
			clk.Advance(time.Second)
			if err := db.Audit(ctx, Identity{fmt.Sprint("u", i), RoleViewer}, a, "job-1", "denied"); err != nil {
				t.Fatal(err)
			}
		}
		log, err := db.AuditLog(ctx)
		if err != nil || len(log) != 3 || log[0].Action != "submit" || log[2].Who != "u2" || log[1].At != "2026-01-02T03:04:07Z" {
			t.Errorf("audit: %+v %v", log, err)
		}
	})
	t.Run("jobs", func(t *testing.T) {
		clk := clock.NewManual(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		db := open(t, clk)
		for i, id := range []string{"b", "a"} {
			clk.Advance(time.Second)
			if err := db.AddJob(ctx, JobRow{ID: id, Dir: "/d/" + id, Task: TaskName, SubmittedBy: "ann", JSON: i == 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.AddJob(ctx, JobRow{ID: "a", Dir: "/x", Task: TaskName, SubmittedBy: "eve"}); err == nil {
			t.Error("a second job a")
		}
		if err := db.SetJobState(ctx, "b", JobEnded, 3); err != nil {
			t.Fatal(err)
		}
		rows, err := db.Jobs(ctx)
		if err != nil || len(rows) != 2 || rows[0].ID != "b" || rows[0].State != JobEnded || rows[0].ExitCode != 3 || rows[0].JSON ||
			rows[1].State != JobQueued || !rows[1].JSON || rows[1].Dir != "/d/a" {
			t.Errorf("jobs: %+v %v", rows, err)
		}
		if j, ok, err := db.Job(ctx, "a"); !ok || err != nil || j.SubmittedBy != "ann" {
			t.Errorf("job a: %+v %v %v", j, ok, err)
		}
	})
}

// TestServerOnPostgres: the roles test on a server whose database is
// PostgreSQL.
func TestServerOnPostgres(t *testing.T) {
	t.Parallel()
	fx := newFixtureOn(t, openPostgres)
	rolesScenario(t, fx)
}
