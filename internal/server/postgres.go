package server

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"net/url"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/sqlschema"
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
	return sqlschema.MigratePostgres(ctx, d.db, "vastfleet_serve_version", pgMigrateLock, pgSchema)
}

// leaseClass is the first key of the server's session-level advisory
// locks (the two-key form, apart from pgMigrateLock's one-key space).
const leaseClass = 8480

// Lease is work this server replica holds: on PostgreSQL a session-level
// advisory lock, on a connection the lease keeps. When the process dies
// its connection closes and PostgreSQL frees the lock, so another replica
// can take the work over. On SQLite (one server process) every lease is
// granted.
type Lease struct {
	conn *sql.Conn
	key  int32
	lost chan struct{}
	stop chan struct{}
	once sync.Once
}

// TryLease takes the lease named name if no replica holds it; ok is
// false when another one does. Its connection is checked every check:
// once it is found broken the lock may be another replica's, and Lost
// is closed.
func (d *DB) TryLease(ctx context.Context, name string, check time.Duration) (l *Lease, ok bool, err error) {
	l = &Lease{lost: make(chan struct{}), stop: make(chan struct{})}
	if !d.pg {
		return l, true, nil
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	l.key = int32(h.Sum32())
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, false, err
	}
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1, $2)`, leaseClass, l.key).Scan(&ok); err != nil || !ok {
		conn.Close()
		return nil, false, err
	}
	l.conn = conn
	go l.watch(check, conn.PingContext)
	return l, true, nil
}

// leasePingTimeout bounds one check of a lease's connection. The lock is
// lost only when the session ends, and a session that ended answers at
// once (reset, closed): a check that is merely slow (a loaded machine,
// a busy database) is not a loss, and reading it as one stopped a job's
// up with nobody else to run it. A connection that hangs this long is
// given up, since its session may have ended behind a partition.
const leasePingTimeout = 10 * time.Second

// watch checks the lease's connection every every; ping is the check.
func (l *Lease) watch(every time.Duration, ping func(context.Context) error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(every, leasePingTimeout))
		err := ping(ctx)
		cancel()
		if err != nil {
			close(l.lost)
			return
		}
	}
}

// Lost is closed when the lease's connection broke: the work must stop,
// as another replica may have taken it.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release gives the lease back.
func (l *Lease) Release() {
	l.once.Do(func() {
		close(l.stop)
		if l.conn == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l.conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1, $2)`, leaseClass, l.key)
		l.conn.Close()
	})
}

// Shared says whether other server replicas may use this database
// (PostgreSQL): each job then runs under a lease.
func (d *DB) Shared() bool { return d.pg }
