// Package sqlschema is the one rule for bringing a database's schema up
// to date: numbered steps applied in order in one transaction, a version
// counting those done (SQLite's PRAGMA user_version, a one-row table in
// PostgreSQL), and a database newer than the code refused rather than
// written to; a SQLite database that is not in WAL mode refused; a SQLite
// file made private before SQLite opens it; and SQLite's ? placeholders
// numbered as PostgreSQL's $n (Dollars), so that one statement serves both.
package sqlschema

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Prepare readies the database file at path for sql.Open: it refuses a
// path holding a '?' (where the DSN's options begin), makes its folder
// (0700) and creates the file private (0600) before SQLite would with the
// umask's mode.
func Prepare(path string) error {
	if strings.ContainsRune(path, '?') {
		return fmt.Errorf("database path %q must not contain '?'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	f.Close()
	return nil
}

// RequireWAL refuses a database whose journal mode is not WAL: the
// journal_mode(WAL) pragma did not take, as on a network filesystem.
func RequireWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, want wal (is the file on a network filesystem?)", mode)
	}
	return nil
}

// Migrate applies the steps the database has not had yet.
func Migrate(ctx context.Context, db *sql.DB, steps []string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if err := applySteps(ctx, tx, v, steps); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(steps))); err != nil {
		return err
	}
	return tx.Commit()
}

// MigratePostgres is Migrate on PostgreSQL: the version is the one row of
// table, and the transaction first takes the advisory lock lock, so that
// of two processes starting on one database one migrates and the other
// then finds nothing to do.
func MigratePostgres(ctx context.Context, db *sql.DB, table string, lock int64, steps []string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, lock); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (v INTEGER NOT NULL)`); err != nil {
		return err
	}
	var v int
	err = tx.QueryRowContext(ctx, `SELECT v FROM `+table).Scan(&v)
	if err == sql.ErrNoRows {
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (v) VALUES (0)`); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if err := applySteps(ctx, tx, v, steps); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE `+table+` SET v = $1`, len(steps)); err != nil {
		return err
	}
	return tx.Commit()
}

// Dollars numbers a statement's ? placeholders as PostgreSQL's $1, $2, …
// (statements that use it keep ? out of their string literals).
func Dollars(q string) string {
	if !strings.ContainsRune(q, '?') {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// applySteps runs the steps after version v in tx, refusing a database
// whose version is newer than steps know.
func applySteps(ctx context.Context, tx *sql.Tx, v int, steps []string) error {
	if v > len(steps) {
		return fmt.Errorf("schema version %d is newer than this vastfleet knows (%d): use the vastfleet that wrote it", v, len(steps))
	}
	for i := v; i < len(steps); i++ {
		if _, err := tx.ExecContext(ctx, steps[i]); err != nil {
			return fmt.Errorf("schema step %d: %w", i+1, err)
		}
	}
	return nil
}
