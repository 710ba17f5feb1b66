package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/server/pgtest"
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

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// openPostgres is a fresh database in the shared PostgreSQL.
func openPostgres(t *testing.T, clk clock.Clock) *DB {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
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
