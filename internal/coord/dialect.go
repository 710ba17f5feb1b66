package coord

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/vastfleet/vastfleet/internal/sqlschema"
)

// This file is the one place where coord.db on SQLite and on PostgreSQL
// differ. The coordinator's statements are written once, in SQL both
// take, with SQLite's ? placeholders; conn and txn number them as $n
// for PostgreSQL and pass a Go bool as the 0 or 1 both schemas store.
// What else differs: the schema (pgSchema, its types and its version
// table), group_concat (listDistinct), the write lock (writeLock), and
// the two writes under load, which on PostgreSQL pass their rows as
// arrays in one statement (a round trip per row costs PostgreSQL's
// backend more CPU than the row: BenchmarkStoreWrites).

// isPostgres says whether where names a PostgreSQL database rather than
// a SQLite file.
func isPostgres(where string) bool {
	return strings.HasPrefix(where, "postgres://") || strings.HasPrefix(where, "postgresql://")
}

// conn is a connection pool speaking the coordinator's SQL in its
// database's dialect.
type conn struct {
	db *sql.DB
	pg bool
	// serial: each transaction first takes writeLock, so that writers
	// take turns across processes as SQLite's BEGIN IMMEDIATE makes them
	// (AddItems numbers items from max(id), leaseItem picks the lowest
	// queued item: neither may interleave with another writer).
	serial bool
}

// writeLock is the PostgreSQL advisory lock a coordinator's write
// transaction holds until it ends (apart from the server's 8480 keys).
const writeLock = 8470_0001

// pgMigrateLock is the advisory lock under which coord.db's schema is
// brought up to date in PostgreSQL.
const pgMigrateLock = 8470_0002

func (c *conn) sql(q string) string {
	if c.pg {
		return sqlschema.Dollars(q)
	}
	return q
}

func (c *conn) args(args []any) []any {
	if !c.pg {
		return args
	}
	var out []any // a copy, made at the first bool: the caller's slice stays as it was
	for i, a := range args {
		if b, ok := a.(bool); ok {
			if out == nil {
				out = append([]any(nil), args...)
			}
			out[i] = boolInt(b)
		}
	}
	if out == nil {
		return args
	}
	return out
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// listDistinct is SQLite's group_concat(DISTINCT expr): the distinct
// values joined by commas.
func (c *conn) listDistinct(expr string) string {
	if c.pg {
		return "string_agg(DISTINCT " + expr + ", ',')"
	}
	return "group_concat(DISTINCT " + expr + ")"
}

func (c *conn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return c.db.ExecContext(ctx, c.sql(q), c.args(args)...)
}

func (c *conn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return c.db.QueryContext(ctx, c.sql(q), c.args(args)...)
}

func (c *conn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return c.db.QueryRowContext(ctx, c.sql(q), c.args(args)...)
}

// BeginTx begins a transaction; on a serial conn it holds writeLock.
func (c *conn) BeginTx(ctx context.Context, opts *sql.TxOptions) (*txn, error) {
	tx, err := c.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	if c.serial && c.pg {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, writeLock); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	return &txn{tx: tx, c: c}, nil
}

func (c *conn) Close() error { return c.db.Close() }

// txn is a transaction speaking the coordinator's SQL in its dialect.
type txn struct {
	tx *sql.Tx
	c  *conn
}

func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.c.sql(q), t.c.args(args)...)
}

func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.c.sql(q), t.c.args(args)...)
}

func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.c.sql(q), t.c.args(args)...)
}

// PrepareContext prepares q; its arguments are passed as they are (the
// statements prepared take no bool).
func (t *txn) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	return t.tx.PrepareContext(ctx, t.c.sql(q))
}

// withPrepared runs each with stmt prepared in one transaction, committed
// when each succeeds.
func (c *conn) withPrepared(ctx context.Context, stmt string, each func(*sql.Stmt) error) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, stmt)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := each(st); err != nil {
		return err
	}
	return tx.Commit()
}

func (t *txn) Commit() error   { return t.tx.Commit() }
func (t *txn) Rollback() error { return t.tx.Rollback() }

// The coordinator's two writes under load on PostgreSQL, each one
// statement with the rows as arrays.
const (
	pgUpsertNodesSQL = `INSERT INTO nodes (fleet, node, last_seen, heartbeat)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
		ON CONFLICT (fleet, node) DO UPDATE SET last_seen = excluded.last_seen, heartbeat = excluded.heartbeat`
	pgInsertFindingsSQL = `INSERT INTO findings (fleet, key, node, session, at, data, received_at, item)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[])
		ON CONFLICT (fleet, key) DO NOTHING RETURNING fleet, key`
)

// saveNodesArrays is saveNodes on PostgreSQL. A node named twice in nodes
// would fail the statement (it may change a row once): the last wins.
func saveNodesArrays(ctx context.Context, w *conn, nodes []savedNode) error {
	type key struct{ fleet, node string }
	at := make(map[key]int, len(nodes))
	cols := make([][]string, 4)
	for _, n := range nodes {
		b, err := json.Marshal(n.hb)
		if err != nil {
			return err
		}
		row := []string{n.fleet, n.hb.Node, n.lastSeen.UTC().Format(time.RFC3339Nano), string(b)}
		if i, ok := at[key{n.fleet, n.hb.Node}]; ok {
			for c := range cols {
				cols[c][i] = row[c]
			}
			continue
		}
		at[key{n.fleet, n.hb.Node}] = len(cols[0])
		for c := range cols {
			cols[c] = append(cols[c], row[c])
		}
	}
	_, err := w.ExecContext(ctx, pgUpsertNodesSQL, cols[0], cols[1], cols[2], cols[3])
	return err
}

// insertFindingsArrays is insertFindings on PostgreSQL: one statement
// for the whole group, which returns the keys it stored. A key twice in
// the group is stored once, from its first batch, as row by row.
func insertFindingsArrays(ctx context.Context, w *conn, batches []*findingsReq) error {
	cols := make([][]string, 7)
	var items []int64
	for _, b := range batches {
		recv := b.receivedAt.UTC().Format(time.RFC3339Nano)
		for _, it := range b.items {
			for c, v := range []string{b.fleet, it.Key, b.node, it.Session, it.At.UTC().Format(time.RFC3339Nano), string(it.Data), recv} {
				cols[c] = append(cols[c], v)
			}
			items = append(items, it.Item)
		}
	}
	type key struct{ fleet, key string }
	stored := map[key]bool{}
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, pgInsertFindingsSQL, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], items)
	if err != nil {
		return err
	}
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.fleet, &k.key); err != nil {
			rows.Close()
			return err
		}
		stored[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, b := range batches {
		b.stored = 0
		for i, it := range b.items {
			if k := (key{b.fleet, it.Key}); stored[k] {
				delete(stored, k) // the first batch naming it stored it
				b.stored++
				b.new = append(b.new, i)
			}
		}
	}
	return nil
}

// pgSchema is schema in PostgreSQL, as its steps leave it, in one step:
// a later change is a new step in both lists. Integers are BIGINT (times
// are Unix nanoseconds), blobs BYTEA; runs has the rowid SQLite gives
// every table, which itemRuns orders by.
var pgSchema = []string{
	`CREATE TABLE fleets (
		name              TEXT PRIMARY KEY,
		agent_token_hash  BYTEA NOT NULL,
		viewer_token_hash BYTEA NOT NULL,
		created           TEXT NOT NULL
	);
	CREATE TABLE findings (
		id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		fleet       TEXT NOT NULL,
		key         TEXT NOT NULL,
		node        TEXT NOT NULL,
		session     TEXT NOT NULL DEFAULT '',
		at          TEXT NOT NULL,
		data        TEXT NOT NULL,
		received_at TEXT NOT NULL,
		item        BIGINT NOT NULL DEFAULT 0,
		UNIQUE (fleet, key)
	);
	CREATE TABLE nodes (
		fleet     TEXT NOT NULL,
		node      TEXT NOT NULL,
		last_seen TEXT NOT NULL,
		heartbeat TEXT NOT NULL,
		PRIMARY KEY (fleet, node)
	);
	CREATE TABLE fleet_policy (
		fleet          TEXT PRIMARY KEY,
		orphan_after_s DOUBLE PRECISION NOT NULL,
		orphan_policy  TEXT NOT NULL
	);
	CREATE TABLE items (
		fleet         TEXT NOT NULL,
		id            BIGINT NOT NULL,
		value         TEXT NOT NULL,
		state         TEXT NOT NULL DEFAULT 'queued',
		lease         TEXT NOT NULL DEFAULT '',
		owner_node    TEXT NOT NULL DEFAULT '',
		owner_session TEXT NOT NULL DEFAULT '',
		lease_expires BIGINT NOT NULL DEFAULT 0,
		attempts      BIGINT NOT NULL DEFAULT 0,
		results       BIGINT NOT NULL DEFAULT 0,
		exit_code     BIGINT,
		stdout_tail   TEXT NOT NULL DEFAULT '',
		outputs       TEXT NOT NULL DEFAULT '',
		result_node   TEXT NOT NULL DEFAULT '',
		result_lease  TEXT NOT NULL DEFAULT '',
		done_at       BIGINT NOT NULL DEFAULT 0,
		need          BIGINT NOT NULL DEFAULT 1,
		quorum        BIGINT NOT NULL DEFAULT 0,
		digest        TEXT NOT NULL DEFAULT '',
		validated     BIGINT NOT NULL DEFAULT 0,
		PRIMARY KEY (fleet, id),
		UNIQUE (fleet, value)
	);
	CREATE INDEX items_queue ON items (fleet, state, id);
	CREATE INDEX items_expiry ON items (state, lease_expires);
	CREATE TABLE credentials (
		token_hash  BYTEA PRIMARY KEY,
		fleet       TEXT NOT NULL,
		instance_id BIGINT NOT NULL,
		node        TEXT NOT NULL,
		machine_id  BIGINT NOT NULL DEFAULT 0,
		image       TEXT NOT NULL DEFAULT '',
		issued_at   BIGINT NOT NULL,
		revoked_at  BIGINT NOT NULL DEFAULT 0,
		reason      TEXT NOT NULL DEFAULT ''
	);
	CREATE UNIQUE INDEX credentials_instance ON credentials (fleet, instance_id) WHERE revoked_at = 0;
	CREATE UNIQUE INDEX credentials_node ON credentials (fleet, node) WHERE revoked_at = 0;
	CREATE TABLE runs (
		rowid       BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
		fleet       TEXT NOT NULL,
		item        BIGINT NOT NULL,
		lease       TEXT NOT NULL,
		node        TEXT NOT NULL,
		session     TEXT NOT NULL DEFAULT '',
		host        TEXT NOT NULL,
		machine_id  BIGINT NOT NULL DEFAULT 0,
		image       TEXT NOT NULL DEFAULT '',
		state       TEXT NOT NULL DEFAULT 'leased',
		spot        BIGINT NOT NULL DEFAULT 0,
		expires     BIGINT NOT NULL DEFAULT 0,
		exit_code   BIGINT NOT NULL DEFAULT 0,
		stdout_tail TEXT NOT NULL DEFAULT '',
		outputs     TEXT NOT NULL DEFAULT '',
		digest      TEXT NOT NULL DEFAULT '',
		verdict     TEXT NOT NULL DEFAULT '',
		at          BIGINT NOT NULL DEFAULT 0,
		PRIMARY KEY (fleet, item, lease)
	);
	CREATE INDEX runs_expiry ON runs (state, expires);
	CREATE INDEX runs_holder ON runs (fleet, node, session, state);
	CREATE INDEX runs_host ON runs (host, state);
	CREATE TABLE fleet_validation (
		fleet    TEXT PRIMARY KEY,
		mode     TEXT NOT NULL,
		replicas BIGINT NOT NULL,
		quorum   BIGINT NOT NULL,
		spot     DOUBLE PRECISION NOT NULL,
		verify   TEXT NOT NULL
	);
	CREATE TABLE trust (
		host        TEXT NOT NULL,
		image       TEXT NOT NULL,
		consecutive BIGINT NOT NULL DEFAULT 0,
		valid       BIGINT NOT NULL DEFAULT 0,
		invalid     BIGINT NOT NULL DEFAULT 0,
		PRIMARY KEY (host, image)
	);
	CREATE TABLE caught (
		host       TEXT PRIMARY KEY,
		machine_id BIGINT NOT NULL,
		reason     TEXT NOT NULL,
		at         BIGINT NOT NULL
	);`,
}
