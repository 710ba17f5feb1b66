// Package store keeps vastfleet's durable state in one SQLite file (WAL):
// fleets, launch intents, the instances they produced, their state history,
// machines to avoid, and a small key/value table. Its one job that matters
// most is that no rented instance is ever forgotten: an intent is written
// before a create call, the instance row before anything else happens to it,
// and a row leaves the live set only through MarkGone.
//
// The store never reads the clock: every timestamp is passed in by the
// caller, so state transitions are deterministic and testable.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go)

	"github.com/vastfleet/vastfleet/internal/sqlschema"
)

// ErrNotFound is returned (wrapped) when a row does not exist.
var ErrNotFound = errors.New("not found")

// rowScanner is a row to scan: *sql.Row or *sql.Rows.
type rowScanner = interface{ Scan(...any) error }

// queryAll runs query and scans each row of its answer with scan, in
// order; on an error reading the rows it returns those scanned before.
func queryAll[T any](ctx context.Context, db *sql.DB, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// oneRow is a single-row lookup's answer: v, or err wrapped after what was
// looked up (format and args), ErrNotFound where there is no such row.
func oneRow[T any](v T, err error, format string, args ...any) (T, error) {
	if err == nil {
		return v, nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	var zero T
	return zero, fmt.Errorf(format+": %w", append(args, err)...)
}

// ErrConflict is returned (wrapped) when a row already exists or a change is
// not allowed from the row's current state.
var ErrConflict = errors.New("conflict")

// FileName is the database file's name inside the data directory.
const FileName = "vastfleet.db"

//go:embed migrations/*.sql
var migrationFS embed.FS

// Store is an open state database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
}

// DefaultDir returns the per-user data directory: $VASTFLEET_HOME, else
// $XDG_DATA_HOME/vastfleet, else ~/.local/share/vastfleet.
func DefaultDir() (string, error) {
	if d := os.Getenv("VASTFLEET_HOME"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "vastfleet"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("store: no data directory: set VASTFLEET_HOME: %w", err)
	}
	return filepath.Join(home, ".local", "share", "vastfleet"), nil
}

// dsn builds the driver string. synchronous=FULL: in WAL mode NORMAL may
// lose the last committed transactions on power loss (the WAL is not synced
// at each commit). A lost "intent created" or "instance recorded" row is an
// instance we forget and that bills forever, and our write rate is tiny, so
// the extra fsync per commit is the right price.
// _txlock=immediate makes every transaction take the write lock at BEGIN, so
// busy_timeout applies instead of a read-to-write upgrade failing with
// SQLITE_BUSY at once.
func dsn(path string) string {
	return path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)" +
		"&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)&_txlock=immediate"
}

// Open opens (creating if needed) the database at path and brings its
// schema up to date.
func Open(ctx context.Context, path string) (*Store, error) {
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("store: database path %q must not contain '?'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := privateFiles(path); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxIdleConns(4)
	s := &Store{db: db, path: path}
	if err := sqlschema.RequireWAL(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Path is the database file's path.
func (s *Store) Path() string { return s.path }

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, n := range names {
		base := filepath.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", base)
		}
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d (versions must be 1, 2, 3, ...)", m.name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the highest schema version this build knows.
func SchemaVersion() int {
	ms, err := loadMigrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// migrate applies every migration not yet recorded, each in its own
// transaction together with its schema_migrations row, so a crash leaves the
// schema at a whole version.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name    TEXT NOT NULL
	)`); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	var have int
	if err := s.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&have); err != nil {
		return err
	}
	if have > len(ms) {
		return fmt.Errorf("database schema version %d is newer than this vastfleet knows (%d); upgrade vastfleet", have, len(ms))
	}
	for _, m := range ms[have:] {
		err := s.tx(ctx, func(tx *sql.Tx) error {
			// Another process may have applied it since we looked.
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations WHERE version = ?", m.version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations(version, name) VALUES (?, ?)", m.version, m.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

// tx runs fn in one write transaction; any error rolls everything back.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// timeLayout is fixed width so stored times compare correctly as text.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

func fmtTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// fmtNullTime stores the zero time as NULL.
func fmtNullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return fmtTime(t)
}

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s, err)
	}
	return t, nil
}

func parseNullTime(ns sql.NullString) (time.Time, error) {
	if !ns.Valid {
		return time.Time{}, nil
	}
	return parseTime(ns.String)
}

func nullFloat(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func floatPtr(nf sql.NullFloat64) *float64 {
	if !nf.Valid {
		return nil
	}
	v := nf.Float64
	return &v
}

// SetMeta stores value under key, replacing any earlier value.
func (s *Store) SetMeta(ctx context.Context, key, value string) error {
	_, err := s.db.ExecContext(ctx,
		"INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", key, value)
	if err != nil {
		return fmt.Errorf("store: set meta %q: %w", key, err)
	}
	return nil
}

// GetMeta returns the value stored under key, or ErrNotFound.
func (s *Store) GetMeta(ctx context.Context, key string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("store: meta %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("store: get meta %q: %w", key, err)
	}
	return v, nil
}

// idKey is the meta key of the store's identity.
const idKey = "store_id"

// ID is this store's identity: 8 hex digits drawn once, when first asked
// for, and kept. Labels carry it so that two data dirs renting on one
// account never take each other's instances for their own.
func (s *Store) ID(ctx context.Context) (string, error) {
	if id, err := s.GetMeta(ctx, idKey); err == nil {
		return id, nil
	} else if !errors.Is(err, ErrNotFound) {
		return "", err
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("store: drawing an id: %w", err)
	}
	// INSERT OR IGNORE: when two handles race, the first id written wins
	// and both read it back.
	if _, err := s.db.ExecContext(ctx, "INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", idKey, hex.EncodeToString(b[:])); err != nil {
		return "", fmt.Errorf("store: set id: %w", err)
	}
	return s.GetMeta(ctx, idKey)
}
