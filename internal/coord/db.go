package coord

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/sqlschema"
	"github.com/vastfleet/vastfleet/internal/wire"

	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go)
)

// DB is the coordinator's own SQLite file (coord.db in the data
// directory). It is separate from the store's state.db so that a
// long-running coordinator never holds the data directory's single-writer
// lock: ls, cost, exec and destroy keep working beside it. It may instead
// be a PostgreSQL database (Open with a postgres:// URL; dialect.go has
// what differs).
//
// Plain tokens live in a 0600 JSON file beside it (TokensPath); the
// database keeps only their sha256, so a copy of coord.db handed to
// someone for its findings does not hand over the fleet.
type DB struct {
	// db reads; w writes, through one connection: a thousand agents
	// enrolling at once queue in Go, in order, instead of spinning in
	// SQLite's busy handler until busy_timeout fails the slowest (750
	// of 1,000 enrollments failed with SQLITE_BUSY before).
	db, w  *conn
	path   string // the SQLite file, or the PostgreSQL URL without its password
	tokens string // TokensPath
	// tokensMu serialises FleetTokens inside this process; across
	// processes the write transaction does.
	tokensMu sync.Mutex
}

// schema is applied in order; PRAGMA user_version counts what is done.
var schema = []string{
	`CREATE TABLE fleets (
		name              TEXT PRIMARY KEY,
		agent_token_hash  BLOB NOT NULL,
		viewer_token_hash BLOB NOT NULL,
		created           TEXT NOT NULL
	);
	CREATE TABLE findings (
		id          INTEGER PRIMARY KEY,
		fleet       TEXT NOT NULL,
		key         TEXT NOT NULL,
		node        TEXT NOT NULL,
		session     TEXT NOT NULL DEFAULT '',
		at          TEXT NOT NULL,
		data        TEXT NOT NULL,
		received_at TEXT NOT NULL,
		UNIQUE (fleet, key)
	);
	CREATE TABLE nodes (
		fleet     TEXT NOT NULL,
		node      TEXT NOT NULL,
		last_seen TEXT NOT NULL,
		heartbeat TEXT NOT NULL,
		PRIMARY KEY (fleet, node)
	);`,
	// What each fleet's dead-man switch was set to at launch, so that a
	// later vastfleet command reaps silent instances the same way.
	`CREATE TABLE fleet_policy (
		fleet         TEXT PRIMARY KEY,
		orphan_after_s REAL NOT NULL,
		orphan_policy TEXT NOT NULL
	);`,
	// Work items. Ids count from 1 per fleet in the order items were
	// added; a value is one item however often it is added. Times are
	// Unix nanoseconds so that SQLite compares them as numbers. The
	// result columns are written once, by the first result (results
	// counts every one received, replays and second runs included).
	`CREATE TABLE items (
		fleet         TEXT NOT NULL,
		id            INTEGER NOT NULL,
		value         TEXT NOT NULL,
		state         TEXT NOT NULL DEFAULT 'queued',
		lease         TEXT NOT NULL DEFAULT '',
		owner_node    TEXT NOT NULL DEFAULT '',
		owner_session TEXT NOT NULL DEFAULT '',
		lease_expires INTEGER NOT NULL DEFAULT 0,
		attempts      INTEGER NOT NULL DEFAULT 0,
		results       INTEGER NOT NULL DEFAULT 0,
		exit_code     INTEGER,
		stdout_tail   TEXT NOT NULL DEFAULT '',
		outputs       TEXT NOT NULL DEFAULT '',
		result_node   TEXT NOT NULL DEFAULT '',
		result_lease  TEXT NOT NULL DEFAULT '',
		done_at       INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (fleet, id),
		UNIQUE (fleet, value)
	);
	CREATE INDEX items_queue ON items (fleet, state, id);
	CREATE INDEX items_expiry ON items (state, lease_expires);
	ALTER TABLE findings ADD COLUMN item INTEGER NOT NULL DEFAULT 0;`,
	// Per-instance credentials (hashed): an instance enrolls once with its
	// fleet's bootstrap token; revoked_at (Unix ns, 0 while it stands) is
	// set when the instance leaves the fleet.
	`CREATE TABLE credentials (
		token_hash  BLOB PRIMARY KEY,
		fleet       TEXT NOT NULL,
		instance_id INTEGER NOT NULL,
		node        TEXT NOT NULL,
		machine_id  INTEGER NOT NULL DEFAULT 0,
		image       TEXT NOT NULL DEFAULT '',
		issued_at   INTEGER NOT NULL,
		revoked_at  INTEGER NOT NULL DEFAULT 0,
		reason      TEXT NOT NULL DEFAULT ''
	);
	CREATE UNIQUE INDEX credentials_instance ON credentials (fleet, instance_id) WHERE revoked_at = 0;
	CREATE UNIQUE INDEX credentials_node ON credentials (fleet, node) WHERE revoked_at = 0;`,
	// Validation. A run is one lease of an item and its result: a result
	// is taken only for a run its node holds. need is how many runs an
	// item wants, quorum how many must agree (0: adaptive has not chosen);
	// digest is the kept answer's (see resultDigest), validated whether
	// it was checked. trust counts a host's consecutive valid results per
	// image; caught is every host that returned a wrong one.
	`CREATE TABLE runs (
		fleet       TEXT NOT NULL,
		item        INTEGER NOT NULL,
		lease       TEXT NOT NULL,
		node        TEXT NOT NULL,
		session     TEXT NOT NULL DEFAULT '',
		host        TEXT NOT NULL,
		machine_id  INTEGER NOT NULL DEFAULT 0,
		image       TEXT NOT NULL DEFAULT '',
		state       TEXT NOT NULL DEFAULT 'leased',
		spot        INTEGER NOT NULL DEFAULT 0,
		expires     INTEGER NOT NULL DEFAULT 0,
		exit_code   INTEGER NOT NULL DEFAULT 0,
		stdout_tail TEXT NOT NULL DEFAULT '',
		outputs     TEXT NOT NULL DEFAULT '',
		digest      TEXT NOT NULL DEFAULT '',
		verdict     TEXT NOT NULL DEFAULT '',
		at          INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (fleet, item, lease)
	);
	CREATE INDEX runs_expiry ON runs (state, expires);
	CREATE INDEX runs_holder ON runs (fleet, node, session, state);
	CREATE INDEX runs_host ON runs (host, state);
	INSERT INTO runs (fleet, item, lease, node, session, host, state, expires)
		SELECT fleet, id, lease, owner_node, owner_session, 'node ' || owner_node, 'leased', lease_expires
		FROM items WHERE state = 'leased';
	ALTER TABLE items ADD COLUMN need INTEGER NOT NULL DEFAULT 1;
	ALTER TABLE items ADD COLUMN quorum INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE items ADD COLUMN digest TEXT NOT NULL DEFAULT '';
	ALTER TABLE items ADD COLUMN validated INTEGER NOT NULL DEFAULT 0;
	CREATE TABLE fleet_validation (
		fleet    TEXT PRIMARY KEY,
		mode     TEXT NOT NULL,
		replicas INTEGER NOT NULL,
		quorum   INTEGER NOT NULL,
		spot     REAL NOT NULL,
		verify   TEXT NOT NULL
	);
	CREATE TABLE trust (
		host        TEXT NOT NULL,
		image       TEXT NOT NULL,
		consecutive INTEGER NOT NULL DEFAULT 0,
		valid       INTEGER NOT NULL DEFAULT 0,
		invalid     INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (host, image)
	);
	CREATE TABLE caught (
		host       TEXT PRIMARY KEY,
		machine_id INTEGER NOT NULL,
		reason     TEXT NOT NULL,
		at         INTEGER NOT NULL
	);`,
}

// synchronous=FULL because a finding is acknowledged only after its
// commit, and the agent then forgets it: in WAL mode NORMAL could lose the
// last commits on power loss. Group commit (see writer.go) keeps the fsync
// count low. _txlock=immediate: every transaction takes the write lock at
// BEGIN so busy_timeout applies rather than a failed upgrade.
func dsn(path string) string {
	return path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(FULL)&_txlock=immediate"
}

// OpenDB is Open with the tokens file beside the SQLite file at path.
func OpenDB(ctx context.Context, path string) (*DB, error) { return Open(ctx, path, "") }

// Open opens (creating or migrating if needed) the coordinator database
// where: a SQLite file's path, or a PostgreSQL URL (postgres://…). tokens
// is the file for the fleets' plain tokens; "" puts it beside a SQLite
// file, and a PostgreSQL database needs one named.
func Open(ctx context.Context, where, tokens string) (*DB, error) {
	if isPostgres(where) {
		return openPostgres(ctx, where, tokens)
	}
	path := where
	if tokens == "" {
		tokens = path + "-tokens.json"
	}
	// The findings are the user's results and the file names the fleets:
	// it is created private.
	if err := sqlschema.Prepare(path); err != nil {
		return nil, fmt.Errorf("coord: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("coord: open %s: %w", path, err)
	}
	db.SetMaxIdleConns(4)
	w, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("coord: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	d := &DB{db: &conn{db: db}, w: &conn{db: w, serial: true}, path: path, tokens: tokens}
	if err := sqlschema.RequireWAL(ctx, db); err != nil {
		d.Close()
		return nil, fmt.Errorf("coord: open %s: %w", path, err)
	}
	if err := sqlschema.Migrate(ctx, w, schema); err != nil {
		d.Close()
		return nil, fmt.Errorf("coord: open %s: %w", path, err)
	}
	return d, nil
}

// openPostgres is Open on PostgreSQL. Writes go through one connection,
// as on SQLite, and each write transaction holds writeLock: the
// coordinator's transactions assume they are the only writer.
func openPostgres(ctx context.Context, url, tokens string) (*DB, error) {
	name := redactedURL(url)
	if tokens == "" {
		return nil, fmt.Errorf("coord: open %s: a PostgreSQL coordinator database needs a file for its fleets' tokens (none was given)", name)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("coord: open %s: %w", name, err)
	}
	// Reads are few (the dashboard's state, a command's counts): a small
	// pool leaves PostgreSQL's connections to others.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	w, err := sql.Open("pgx", url)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("coord: open %s: %w", name, err)
	}
	w.SetMaxOpenConns(1)
	d := &DB{db: &conn{db: db, pg: true}, w: &conn{db: w, pg: true, serial: true}, path: name, tokens: tokens}
	if err := sqlschema.MigratePostgres(ctx, w, "vastfleet_coord_version", pgMigrateLock, pgSchema); err != nil {
		d.Close()
		return nil, fmt.Errorf("coord: open %s: %w", name, err)
	}
	return d, nil
}

// redactedURL is a database URL fit for a message: without its password.
func redactedURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

// Close closes the database.
func (d *DB) Close() error { return errors.Join(d.w.Close(), d.db.Close()) }

// Path is the database file's path (PostgreSQL: its URL, redacted).
func (d *DB) Path() string { return d.path }

// TokensPath is the 0600 file beside the database that keeps the fleets'
// plain tokens, for the CLI to write onstarts and print dashboard URLs.
func (d *DB) TokensPath() string { return d.tokens }

type tokenPair struct {
	Agent  string `json:"agent"`
	Viewer string `json:"viewer"`
}

func hashToken(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	// Hex: safe unquoted in the onstart's shell and in a URL.
	return hex.EncodeToString(b), nil
}

// FleetTokens returns the fleet's agent (write-only) and viewer
// (read-only) tokens, creating them the first time a fleet is named. If
// the tokens file was lost the plain tokens cannot be recovered, so new
// ones are made; agents holding the old agent token are then refused.
func (d *DB) FleetTokens(ctx context.Context, fleet string) (agent, viewer string, err error) {
	if err := validName("fleet", fleet); err != nil {
		return "", "", err
	}
	d.tokensMu.Lock()
	defer d.tokensMu.Unlock()
	// The write transaction is the lock between processes (a coordinator
	// and a launch both naming a fleet): the file is rewritten inside it.
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return "", "", fmt.Errorf("coord: fleet tokens: %w", err)
	}
	defer tx.Rollback()
	agentHash, viewerHash, known, err := fleetTokenHashes(ctx, tx, fleet)
	if err != nil {
		return "", "", err
	}
	pair, recorded, err := d.filedTokens(fleet, known, agentHash, viewerHash)
	switch {
	case err != nil:
		return "", "", err
	case recorded:
		return pair.Agent, pair.Viewer, nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO fleets (name, agent_token_hash, viewer_token_hash, created)
		VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET agent_token_hash = excluded.agent_token_hash,
			viewer_token_hash = excluded.viewer_token_hash`,
		fleet, hashToken(pair.Agent), hashToken(pair.Viewer), time.Now().UTC().Format(time.RFC3339Nano))
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return "", "", fmt.Errorf("coord: fleet tokens: %w", err)
	}
	return pair.Agent, pair.Viewer, nil
}

// filedTokens are the fleet's tokens from the tokens file, made and
// filed anew when the file has none that match the fleet's row; recorded
// says the row already holds them.
func (d *DB) filedTokens(fleet string, known bool, agentHash, viewerHash []byte) (pair tokenPair, recorded bool, err error) {
	file, err := d.readTokens()
	if err != nil {
		return tokenPair{}, false, err
	}
	pair, inFile := file[fleet]
	if known && inFile && pair.hashesTo(agentHash, viewerHash) {
		return pair, true, nil
	}
	// A file entry without a row is a crash between the file write and
	// the row's commit: keep those tokens, an onstart may already use them.
	if !known && inFile && pair.Agent != "" && pair.Viewer != "" {
		return pair, false, nil
	}
	if pair, err = newTokenPair(); err != nil {
		return tokenPair{}, false, err
	}
	file[fleet] = pair
	return pair, false, d.writeTokens(file)
}

// fleetTokenHashes reads the fleet's token hashes; known is false when
// the fleet has no row yet.
func fleetTokenHashes(ctx context.Context, tx *txn, fleet string) (agentHash, viewerHash []byte, known bool, err error) {
	err = tx.QueryRowContext(ctx, `SELECT agent_token_hash, viewer_token_hash FROM fleets WHERE name = ?`, fleet).
		Scan(&agentHash, &viewerHash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil, false, nil
	case err != nil:
		return nil, nil, false, fmt.Errorf("coord: fleet tokens: %w", err)
	}
	return agentHash, viewerHash, true, nil
}

// hashesTo says, in constant time, whether the pair is the one whose
// hashes are stored.
func (p tokenPair) hashesTo(agentHash, viewerHash []byte) bool {
	a := subtle.ConstantTimeCompare(hashToken(p.Agent), agentHash)
	v := subtle.ConstantTimeCompare(hashToken(p.Viewer), viewerHash)
	return a&v == 1
}

func newTokenPair() (tokenPair, error) {
	agent, err := newToken()
	if err != nil {
		return tokenPair{}, err
	}
	viewer, err := newToken()
	return tokenPair{Agent: agent, Viewer: viewer}, err
}

func (d *DB) readTokens() (map[string]tokenPair, error) {
	m := map[string]tokenPair{}
	b, err := os.ReadFile(d.TokensPath())
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("coord: tokens: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("coord: tokens file %s: %w", d.TokensPath(), err)
	}
	return m, nil
}

func (d *DB) writeTokens(m map[string]tokenPair) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(d.TokensPath(), append(b, '\n'), 0o600)
}

// Token roles. The fleet's agent token is the bootstrap token: it may
// only enroll an instance (and fetch the agent binary). Each enrolled
// instance's credential is an agent token bound to its node.
const (
	roleBootstrap = "bootstrap"
	roleAgent     = "agent"
	roleViewer    = "viewer"
)

type tokenEntry struct {
	hash  []byte
	fleet string
	role  string
	cred  credential // roleAgent only
}

// tokenHashes lists every fleet's token hashes, for the server's
// authentication table.
func (d *DB) tokenHashes(ctx context.Context) ([]tokenEntry, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT name, agent_token_hash, viewer_token_hash FROM fleets`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []tokenEntry
	for rows.Next() {
		var name string
		var a, v []byte
		if err := rows.Scan(&name, &a, &v); err != nil {
			return nil, err
		}
		out = append(out, tokenEntry{hash: a, fleet: name, role: roleBootstrap}, tokenEntry{hash: v, fleet: name, role: roleViewer})
	}
	return out, rows.Err()
}

// insertFindings stores one batch per element of batches in a single
// transaction (one fsync for all) and reports, per batch, how many keys
// were new. A key already stored is left as it was.
func (d *DB) insertFindings(ctx context.Context, batches []*findingsReq) error {
	if d.w.pg {
		return insertFindingsArrays(ctx, d.w, batches)
	}
	return insertFindingsWith(ctx, d.w, insertFindingSQL, batches)
}

// The statements of the coordinator's two writes under load: the
// findings in group commits and the heartbeats written behind.
const (
	insertFindingSQL = `INSERT INTO findings (fleet, key, node, session, at, data, received_at, item)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (fleet, key) DO NOTHING`
	upsertNodeSQL = `INSERT INTO nodes (fleet, node, last_seen, heartbeat) VALUES (?, ?, ?, ?)
		ON CONFLICT (fleet, node) DO UPDATE SET last_seen = excluded.last_seen, heartbeat = excluded.heartbeat`
)

// insertFindingsWith is insertFindings on w with the statement stmt.
func insertFindingsWith(ctx context.Context, w *conn, stmt string, batches []*findingsReq) error {
	return w.withPrepared(ctx, stmt, func(st *sql.Stmt) error {
		return insertFindingsRows(ctx, st, batches)
	})
}

func insertFindingsRows(ctx context.Context, st *sql.Stmt, batches []*findingsReq) error {
	for _, b := range batches {
		b.stored = 0
		recv := b.receivedAt.UTC().Format(time.RFC3339Nano)
		for i := range b.items {
			it := &b.items[i]
			res, err := st.ExecContext(ctx, b.fleet, it.Key, b.node, it.Session,
				it.At.UTC().Format(time.RFC3339Nano), string(it.Data), recv, it.Item)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 1 {
				b.stored++
				b.new = append(b.new, i)
			}
		}
	}
	return nil
}

// CountFindings is how many distinct findings the fleet has stored.
func (d *DB) CountFindings(ctx context.Context, fleet string) (int64, error) {
	var n int64
	err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM findings WHERE fleet = ?`, fleet).Scan(&n)
	return n, err
}

// Findings lists the fleet's findings, oldest first; limit ≤ 0 means all.
func (d *DB) Findings(ctx context.Context, fleet string, limit int) ([]wire.Finding, error) {
	q := `SELECT key, node, session, at, data, item, received_at FROM findings WHERE fleet = ? ORDER BY id`
	args := []any{fleet}
	if limit > 0 {
		// The newest limit rows, still returned oldest first.
		q = `SELECT key, node, session, at, data, item, received_at FROM
			(SELECT id, key, node, session, at, data, item, received_at FROM findings WHERE fleet = ? ORDER BY id DESC LIMIT ?) AS newest
			ORDER BY id`
		args = append(args, limit)
	}
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []wire.Finding
	for rows.Next() {
		var f wire.Finding
		var at, data, received string
		if err := rows.Scan(&f.Key, &f.Node, &f.Session, &at, &data, &f.Item, &received); err != nil {
			return nil, err
		}
		f.At, _ = time.Parse(time.RFC3339Nano, at)
		f.ReceivedAt, _ = time.Parse(time.RFC3339Nano, received)
		f.Data = json.RawMessage(data)
		out = append(out, f)
	}
	return out, rows.Err()
}

type savedNode struct {
	fleet    string
	lastSeen time.Time
	hb       wire.Heartbeat
}

// saveNodes upserts the latest heartbeat of each node in one transaction.
func (d *DB) saveNodes(ctx context.Context, nodes []savedNode) error {
	if d.w.pg {
		return saveNodesArrays(ctx, d.w, nodes)
	}
	return saveNodesWith(ctx, d.w, upsertNodeSQL, nodes)
}

// saveNodesWith is saveNodes on w with the statement stmt.
func saveNodesWith(ctx context.Context, w *conn, stmt string, nodes []savedNode) error {
	return w.withPrepared(ctx, stmt, func(st *sql.Stmt) error { return saveNodesRows(ctx, st, nodes) })
}

func saveNodesRows(ctx context.Context, st *sql.Stmt, nodes []savedNode) error {
	for _, n := range nodes {
		b, err := json.Marshal(n.hb)
		if err != nil {
			return err
		}
		if _, err := st.ExecContext(ctx, n.fleet, n.hb.Node, n.lastSeen.UTC().Format(time.RFC3339Nano), string(b)); err != nil {
			return err
		}
	}
	return nil
}

// loadNodes reads every node's last known heartbeat.
func (d *DB) loadNodes(ctx context.Context) ([]savedNode, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT fleet, last_seen, heartbeat FROM nodes`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []savedNode
	for rows.Next() {
		var n savedNode
		var seen, hb string
		if err := rows.Scan(&n.fleet, &seen, &hb); err != nil {
			return nil, err
		}
		n.lastSeen, _ = time.Parse(time.RFC3339Nano, seen)
		if err := json.Unmarshal([]byte(hb), &n.hb); err != nil {
			continue // a row this version cannot read is only lost history
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// Reported is a node's last heartbeat's metrics and when it came.
type Reported struct {
	At      time.Time
	Metrics map[string]float64
}

// LastMetrics is each of the fleet's nodes' last reported metrics, by
// instance id, as the coordinator last saved them: what a command in
// another process can show of a running job without its coordinator.
func (d *DB) LastMetrics(ctx context.Context, fleet string) (map[int64]Reported, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT last_seen, heartbeat FROM nodes WHERE fleet = ?`, fleet)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]Reported{}
	for rows.Next() {
		var seen, raw string
		if err := rows.Scan(&seen, &raw); err != nil {
			return nil, err
		}
		var hb wire.Heartbeat
		if json.Unmarshal([]byte(raw), &hb) != nil || hb.InstanceID == 0 || len(hb.Metrics) == 0 {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, seen)
		if prev, ok := out[hb.InstanceID]; ok && prev.At.After(at) {
			continue // the instance's newer node row wins
		}
		out[hb.InstanceID] = Reported{At: at, Metrics: hb.Metrics}
	}
	return out, rows.Err()
}

// fleetsWithFindings counts findings per fleet, for the live counters at
// start.
func (d *DB) findingCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT fleet, count(*) FROM findings GROUP BY fleet`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var f string
		var n int64
		if err := rows.Scan(&f, &n); err != nil {
			return nil, err
		}
		out[f] = n
	}
	return out, rows.Err()
}

// SetFleetPolicy records the dead-man switch a fleet's agents were given.
func (d *DB) SetFleetPolicy(ctx context.Context, fleet string, after time.Duration, policy string) error {
	_, err := d.w.ExecContext(ctx, `INSERT INTO fleet_policy (fleet, orphan_after_s, orphan_policy) VALUES (?, ?, ?)
		ON CONFLICT (fleet) DO UPDATE SET orphan_after_s = excluded.orphan_after_s, orphan_policy = excluded.orphan_policy`,
		fleet, after.Seconds(), policy)
	return err
}

// FleetPolicy is what SetFleetPolicy recorded; ok is false for a fleet
// never launched with agents.
func (d *DB) FleetPolicy(ctx context.Context, fleet string) (after time.Duration, policy string, ok bool, err error) {
	var secs float64
	err = d.db.QueryRowContext(ctx, `SELECT orphan_after_s, orphan_policy FROM fleet_policy WHERE fleet = ?`, fleet).Scan(&secs, &policy)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, err
	}
	return time.Duration(secs * float64(time.Second)), policy, true, nil
}

// LastHeard is when each instance of the fleet last sent a heartbeat, on
// the coordinator's clock, by instance id (nodes that gave none are left
// out).
func (d *DB) LastHeard(ctx context.Context, fleet string) (map[int64]time.Time, error) {
	nodes, err := d.loadNodes(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int64]time.Time{}
	for _, n := range nodes {
		if n.fleet != fleet || n.hb.InstanceID == 0 {
			continue
		}
		if t, ok := out[n.hb.InstanceID]; !ok || n.lastSeen.After(t) {
			out[n.hb.InstanceID] = n.lastSeen
		}
	}
	return out, nil
}
