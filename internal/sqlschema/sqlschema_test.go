package sqlschema

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

func TestMigrateAppliesOnceAndRefusesNewer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	steps := []string{`CREATE TABLE a (x INTEGER)`, `INSERT INTO a VALUES (1)`}
	for range 2 { // the second run has nothing to do
		if err := Migrate(ctx, db, steps); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM a`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows %d, %v: want the insert applied once", n, err)
	}
	if err := Migrate(ctx, db, append(steps, `CREATE TABLE b (y TEXT)`)); err != nil {
		t.Fatal(err)
	}
	// Code that knows fewer steps than the file has must not write to it.
	if err := Migrate(ctx, db, steps); err == nil || !strings.Contains(err.Error(), "newer than this vastfleet knows") {
		t.Fatalf("older code on a newer database: %v", err)
	}
	// A failing step leaves nothing half done.
	if err := Migrate(ctx, db, append(steps, `CREATE TABLE b (y TEXT)`, `CREATE TABLE c (`, `CREATE TABLE d (z)`)); err == nil {
		t.Fatal("a broken step passed")
	}
	var v int
	db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v)
	if v != 3 {
		t.Fatalf("user_version %d after a failed migration, want 3", v)
	}
}

func TestDollarsNumbersPlaceholdersInOrder(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]string{
		`SELECT 1`: `SELECT 1`,
		`SELECT a FROM t WHERE b = ? AND c IN (?, ?)`: `SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)`,
		`INSERT INTO t (x) VALUES (?) -- é`:           `INSERT INTO t (x) VALUES ($1) -- é`,
	} {
		if got := Dollars(q); got != want {
			t.Errorf("Dollars(%q) = %q, want %q", q, got, want)
		}
	}
}
