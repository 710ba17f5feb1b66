package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/sqlschema"

	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go)
)

// Roles. An operator may do what a viewer may, and submit, launch, end and
// destroy; a viewer only reads.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
)

// Why a credential is refused: each is a 401 with its own message.
var (
	ErrNoToken      = errors.New("no API token: pass one with VASTFLEET_TOKEN or a context (`vastfleet context add NAME URL --token-file F`)")
	ErrUnknownToken = errors.New("API token not recognised by this server")
	ErrRevoked      = errors.New("API token revoked")
	ErrExpired      = errors.New("API token expired")
	// ErrForbidden: the role may not do this (403).
	ErrForbidden = errors.New("forbidden")
)

// tokenPrefix marks a vastfleet server token, so a leaked one is
// recognisable in logs and secret scanners.
const tokenPrefix = "vfs_"

// DB is the server's own database: API tokens (only their sha256), the
// audit log and the jobs the server was given. The plain token is shown
// once, when it is created. It is an SQLite file (serve.db in the data
// dir) or a PostgreSQL database; the same conformance suite runs on both.
type DB struct {
	db    *sql.DB
	clock clock.Clock
	// pg: PostgreSQL ($n placeholders, its own schema).
	pg bool
}

var schema = []string{
	`CREATE TABLE tokens (
		name       TEXT PRIMARY KEY,
		role       TEXT NOT NULL,
		hash       BLOB NOT NULL UNIQUE,
		created_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL DEFAULT 0,
		revoked_at INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE audit (
		id      INTEGER PRIMARY KEY,
		at      INTEGER NOT NULL,
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
		submitted_at INTEGER NOT NULL,
		as_json      INTEGER NOT NULL DEFAULT 0,
		state        TEXT NOT NULL,
		exit_code    INTEGER NOT NULL DEFAULT 0
	);`,
}

// OpenDB opens (creating if needed) the server database at path, in WAL
// mode with full syncs: a token revoked or a job accepted is on disk
// before the answer.
func OpenDB(ctx context.Context, path string, clk clock.Clock) (*DB, error) {
	if err := sqlschema.Prepare(path); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("server: open %s: %w", path, err)
	}
	if clk == nil {
		clk = clock.Wall{}
	}
	d := &DB{db: db, clock: clk}
	if err := d.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("server: open %s: %w", path, err)
	}
	return d, nil
}

// exec, query and queryRow take SQLite's ? placeholders, rewritten as $n
// for PostgreSQL.
func (d *DB) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return d.db.ExecContext(ctx, d.rebind(q), args...)
}

func (d *DB) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return d.db.QueryContext(ctx, d.rebind(q), args...)
}

func (d *DB) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return d.db.QueryRowContext(ctx, d.rebind(q), args...)
}

func (d *DB) rebind(q string) string {
	if !d.pg {
		return q
	}
	return sqlschema.Dollars(q)
}

func (d *DB) migrate(ctx context.Context) error {
	if d.pg {
		return d.migratePG(ctx)
	}
	return sqlschema.Migrate(ctx, d.db, schema)
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Identity is who a credential names: the token's name and its role.
type Identity struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// ValidRole says whether role is one the server knows.
func ValidRole(role string) bool { return role == RoleViewer || role == RoleOperator }

func hashToken(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

// CreateToken makes a token for name with role, valid for ttl (0: until
// revoked), and returns it: the only time it is seen in plain.
func (d *DB) CreateToken(ctx context.Context, name, role string, ttl time.Duration) (string, error) {
	if !ValidRole(role) {
		return "", fmt.Errorf("role %q: use %s or %s", role, RoleViewer, RoleOperator)
	}
	if name == "" || strings.ContainsAny(name, " \t\r\n") {
		return "", fmt.Errorf("token name %q: one word", name)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	tok := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	now := d.clock.Now()
	var exp int64
	if ttl > 0 {
		exp = now.Add(ttl).UnixNano()
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, d.rebind(`SELECT count(*) FROM tokens WHERE name = ?`), name).Scan(&n); err != nil {
		return "", err
	}
	if n > 0 {
		return "", fmt.Errorf("a token named %q exists (pick another name; a revoked one keeps its name in the audit log)", name)
	}
	if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO tokens (name, role, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`),
		name, role, hashToken(tok), now.UnixNano(), exp); err != nil {
		return "", err
	}
	return tok, tx.Commit()
}

// RevokeToken revokes name's token; it is refused from then on.
func (d *DB) RevokeToken(ctx context.Context, name string) error {
	res, err := d.exec(ctx, `UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at = 0`, d.clock.Now().UnixNano(), name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("no live token named %q", name)
	}
	return nil
}

// TokenInfo is a token as `serve token ls` shows it (never the token).
type TokenInfo struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	CreatedAt string `json:"created_at"`
	ExpiresAt string `json:"expires_at,omitempty"`
	RevokedAt string `json:"revoked_at,omitempty"`
}

// Tokens lists every token.
func (d *DB) Tokens(ctx context.Context) ([]TokenInfo, error) {
	rows, err := d.query(ctx, `SELECT name, role, created_at, expires_at, revoked_at FROM tokens ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []TokenInfo{}
	for rows.Next() {
		var t TokenInfo
		var c, e, r int64
		if err := rows.Scan(&t.Name, &t.Role, &c, &e, &r); err != nil {
			return nil, err
		}
		t.CreatedAt = stamp(c)
		if e != 0 {
			t.ExpiresAt = stamp(e)
		}
		if r != 0 {
			t.RevokedAt = stamp(r)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339) }

// Authenticate is the identity a presented token names, or why it is
// refused (ErrNoToken, ErrUnknownToken, ErrRevoked, ErrExpired).
func (d *DB) Authenticate(ctx context.Context, tok string) (Identity, error) {
	if tok == "" {
		return Identity{}, ErrNoToken
	}
	var id Identity
	var exp, rev int64
	err := d.queryRow(ctx, `SELECT name, role, expires_at, revoked_at FROM tokens WHERE hash = ?`, hashToken(tok)).
		Scan(&id.Name, &id.Role, &exp, &rev)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Identity{}, ErrUnknownToken
	case err != nil:
		return Identity{}, err
	case rev != 0:
		return Identity{}, fmt.Errorf("%w (token %q, at %s): ask the server's admin for a new one", ErrRevoked, id.Name, stamp(rev))
	case exp != 0 && d.clock.Now().UnixNano() >= exp:
		return Identity{}, fmt.Errorf("%w (token %q, at %s): ask the server's admin for a new one", ErrExpired, id.Name, stamp(exp))
	}
	return id, nil
}

// AuditEntry is one line of the audit log: who did what, and how it went.
type AuditEntry struct {
	At      string `json:"at"`
	Who     string `json:"who"`
	Role    string `json:"role"`
	Action  string `json:"action"`
	Target  string `json:"target,omitempty"`
	Outcome string `json:"outcome"`
}

// Audit records that who did action on target, with its outcome.
func (d *DB) Audit(ctx context.Context, who Identity, action, target, outcome string) error {
	_, err := d.exec(ctx, `INSERT INTO audit (at, who, role, action, target, outcome) VALUES (?, ?, ?, ?, ?, ?)`,
		d.clock.Now().UnixNano(), who.Name, who.Role, action, target, outcome)
	return err
}

// AuditLog is the audit log, oldest first.
func (d *DB) AuditLog(ctx context.Context) ([]AuditEntry, error) {
	rows, err := d.query(ctx, `SELECT at, who, role, action, target, outcome FROM audit ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var e AuditEntry
		var at int64
		if err := rows.Scan(&at, &e.Who, &e.Role, &e.Action, &e.Target, &e.Outcome); err != nil {
			return nil, err
		}
		e.At = stamp(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Server job states: queued (accepted, waits for the runner), running
// (its up runs in the server), downing (being ended), ended (its up, or
// down, returned: ExitCode).
const (
	JobQueued  = "queued"
	JobRunning = "running"
	JobEnded   = "ended"
	// JobDowning: a replica was asked to end it (down) while another ran
	// it; that one stops its up, and the asking one runs down.
	JobDowning = "downing"
)

// JobRow is a job the server was given.
type JobRow struct {
	ID          string `json:"job"`
	Dir         string `json:"-"`
	Task        string `json:"-"` // the task file, inside Dir
	SubmittedBy string `json:"submitted_by"`
	SubmittedAt string `json:"submitted_at"`
	JSON        bool   `json:"-"`
	State       string `json:"server_state"`
	ExitCode    int    `json:"exit_code"`
}

// AddJob records a job accepted (queued).
func (d *DB) AddJob(ctx context.Context, j JobRow) error {
	_, err := d.exec(ctx, `INSERT INTO jobs (id, dir, task, submitted_by, submitted_at, as_json, state) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		j.ID, j.Dir, j.Task, j.SubmittedBy, d.clock.Now().UnixNano(), j.JSON, JobQueued)
	return err
}

// SetJobState records a job's server state (and exit code once ended).
func (d *DB) SetJobState(ctx context.Context, id, state string, code int) error {
	_, err := d.exec(ctx, `UPDATE jobs SET state = ?, exit_code = ? WHERE id = ?`, state, code, id)
	return err
}

// Jobs are the server's jobs, oldest first.
func (d *DB) Jobs(ctx context.Context) ([]JobRow, error) {
	rows, err := d.query(ctx, `SELECT id, dir, task, submitted_by, submitted_at, as_json, state, exit_code FROM jobs ORDER BY submitted_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []JobRow
	for rows.Next() {
		var j JobRow
		var at int64
		if err := rows.Scan(&j.ID, &j.Dir, &j.Task, &j.SubmittedBy, &at, &j.JSON, &j.State, &j.ExitCode); err != nil {
			return nil, err
		}
		j.SubmittedAt = stamp(at)
		out = append(out, j)
	}
	return out, rows.Err()
}

// Job is one job the server was given.
func (d *DB) Job(ctx context.Context, id string) (JobRow, bool, error) {
	all, err := d.Jobs(ctx)
	if err != nil {
		return JobRow{}, false, err
	}
	for _, j := range all {
		if j.ID == id {
			return j, true, nil
		}
	}
	return JobRow{}, false, nil
}
