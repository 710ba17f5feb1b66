package server

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/vastfleet/vastfleet/internal/clock"
)

// pgSchema is schema for PostgreSQL, in the same steps.
var pgSchema = []string{
	`CREATE TABLE tokens (
		name       TEXT PRIMARY KEY,
		role       TEXT NOT NULL,
		hash       BYTEA NOT NULL UNIQUE,
		created_at BIGINT NOT NULL,
		expires_at BIGINT NOT NULL DEFAULT 0,
		revoked_at BIGINT NOT NULL DEFAULT 0
	);
	CREATE TABLE audit (
		id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		at      BIGINT NOT NULL,
		who     TEXT NOT NULL,
		role    TEXT NOT NULL,
		action  TEXT NOT NULL,
		target  TEXT NOT NULL DEFAULT '',
		outcome TEXT NOT NULL
	);
	CREATE TABLE jobs (
		id           TEXT PRIMARY KEY,
		dir          TEXT NOT NULL,
		task         TEXT NOT NULL,
		submitted_by TEXT NOT NULL,
		submitted_at BIGINT NOT NULL,
		as_json      BOOLEAN NOT NULL DEFAULT false,
		state        TEXT NOT NULL,
		exit_code    INTEGER NOT NULL DEFAULT 0
	);`,
}

// pgMigrateLock is the advisory lock two servers starting on one
// database take, so that one of them migrates.
const pgMigrateLock = 8480_0001

// OpenPostgres opens the server database in PostgreSQL (dsn:
// postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=...), migrating it.
func OpenPostgres(ctx context.Context, dsn string, clk clock.Clock) (*DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("server: postgres %s: %w", redacted(dsn), err)
	}
	if clk == nil {
		clk = clock.Wall{}
	}
	d := &DB{db: db, clock: clk, pg: true}
	if err := d.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("server: postgres %s: %w", redacted(dsn), err)
	}
	return d, nil
}

func redacted(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

func (d *DB) migratePG(ctx context.Context) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, pgMigrateLock); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS vastfleet_serve_version (v INTEGER NOT NULL)`); err != nil {
		return err
	}
	var v int
	err = tx.QueryRowContext(ctx, `SELECT v FROM vastfleet_serve_version`).Scan(&v)
	if err == sql.ErrNoRows {
		if _, err := tx.ExecContext(ctx, `INSERT INTO vastfleet_serve_version (v) VALUES (0)`); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	for i := v; i < len(pgSchema); i++ {
		if _, err := tx.ExecContext(ctx, pgSchema[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE vastfleet_serve_version SET v = $1`, len(pgSchema)); err != nil {
		return err
	}
	return tx.Commit()
}
