// Package replica keeps a copy of a data dir somewhere else as it changes,
// and brings a data dir back from that copy: the controller's state
// outlives the machine it runs on.
//
// The SQLite databases are replicated continuously with Litestream, each
// to a directory of its own under the replica URL (file:///PATH or
// sftp://USER@HOST/PATH). The files a job needs besides them (the
// coordinator's certificate and key, the agents' tokens, the fleet's SSH
// key, job records and bundles) are too small and too rare to stream:
// they are kept as rows of one more database, files.db, which is
// replicated the same way, so one restore brings back both at one
// moment's state.
package replica

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"
	_ "github.com/benbjohnson/litestream/file" // file:// replicas
	_ "github.com/benbjohnson/litestream/sftp" // sftp:// replicas
	_ "modernc.org/sqlite"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
)

// FilesDB is the database that holds the data dir's other files.
const FilesDB = "files.db"

// MaxFile bounds a file kept in files.db: larger ones (collected results,
// logs grown large) are left out rather than slowing every snapshot.
const MaxFile = 64 << 20

// SnapshotEvery is how often the files are compared with files.db.
const SnapshotEvery = 2 * time.Second

// skipDirs are the data dir's directories that are not the controller's
// state: the simulated market's own (on vast.ai the market is remote),
// downloads and collected results.
var skipDirs = []string{"sim", "cache", "results"}

// Replicator replicates a data dir while it runs.
type Replicator struct {
	dir   string
	store *litestream.Store
	dbs   []*litestream.DB
	files *sql.DB
	log   *slog.Logger

	stop chan struct{}
	done sync.WaitGroup
	seen map[string]fileStamp
}

type fileStamp struct {
	size  int64
	mtime time.Time
}

// replicaURL is the replica of one database: a directory named after it
// under the replica URL.
func replicaURL(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("replica %q: want file:///PATH or sftp://USER@HOST/PATH", base)
	}
	switch u.Scheme {
	case "file", "sftp":
	default:
		return "", fmt.Errorf("replica %q: scheme %q is not supported here; use file:///PATH or sftp://USER@HOST/PATH", base, u.Scheme)
	}
	u.Path = path.Join(u.Path, name)
	return u.String(), nil
}

func newDB(dir, name, base string, log *slog.Logger) (*litestream.DB, error) {
	ru, err := replicaURL(base, name)
	if err != nil {
		return nil, err
	}
	client, err := litestream.NewReplicaClientFromURL(ru)
	if err != nil {
		return nil, fmt.Errorf("replica for %s: %w", name, err)
	}
	db := litestream.NewDB(filepath.Join(dir, name))
	db.Replica = litestream.NewReplicaWithClient(db, client)
	return db, nil
}

// Start replicates the databases named (files in dir that exist) and
// files.db to base, and keeps files.db in step with dir's other files.
func Start(ctx context.Context, dir, base string, names []string, log *slog.Logger) (*Replicator, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Replicator{dir: dir, log: log, stop: make(chan struct{}), seen: map[string]fileStamp{}}
	files, err := openFiles(filepath.Join(dir, FilesDB))
	if err != nil {
		return nil, err
	}
	r.files = files
	if err := r.snapshot(ctx); err != nil {
		files.Close()
		return nil, fmt.Errorf("keeping the data dir's files: %w", err)
	}
	for _, n := range append(slices.Clone(names), FilesDB) {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			files.Close()
			return nil, fmt.Errorf("replicating %s: %w", n, err)
		}
		db, err := newDB(dir, n, base, log)
		if err != nil {
			files.Close()
			return nil, err
		}
		r.dbs = append(r.dbs, db)
	}
	r.store = litestream.NewStore(r.dbs, litestream.CompactionLevels{{Level: 0}, {Level: 1, Interval: 30 * time.Second}})
	// NewStore gives each database the default logger: ours instead.
	r.store.Logger = log
	for _, db := range r.dbs {
		db.SetLogger(log.With("db", filepath.Base(db.Path())))
	}
	if err := r.store.Open(ctx); err != nil {
		files.Close()
		return nil, fmt.Errorf("starting replication to %s: %w", base, err)
	}
	r.done.Add(1)
	go r.keepFiles()
	return r, nil
}

// keepFiles snapshots the files until Close.
func (r *Replicator) keepFiles() {
	defer r.done.Done()
	t := time.NewTicker(SnapshotEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			if err := r.snapshot(context.Background()); err != nil {
				r.log.Warn("replica: keeping the data dir's files", "err", err)
			}
		}
	}
}

// Flush writes what changed up to now to the replica, and waits for it.
func (r *Replicator) Flush(ctx context.Context) error {
	if err := r.snapshot(ctx); err != nil {
		return err
	}
	var errs []error
	for _, db := range r.dbs {
		if err := db.SyncAndWait(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Base(db.Path()), err))
		}
	}
	return errors.Join(errs...)
}

// Wait returns once every commit made to the database name (a file in the
// data dir, as Start was given it) before the call has reached the
// replica: what a caller acknowledges after it outlives this machine.
// Concurrent calls share a sync where they can: Litestream runs one at a
// time per database, and each covers every commit before it.
func (r *Replicator) Wait(ctx context.Context, name string) error {
	db, err := r.waitFor(name)
	if err != nil {
		return err
	}
	if err := db.SyncAndWait(ctx); err != nil {
		return fmt.Errorf("replicating %s: %w", name, err)
	}
	return nil
}

func (r *Replicator) waitFor(name string) (*litestream.DB, error) {
	for _, db := range r.dbs {
		if filepath.Base(db.Path()) == name {
			return db, nil
		}
	}
	return nil, fmt.Errorf("replica: %s is not replicated", name)
}

// Close flushes and stops replicating. Litestream's connections close
// last: call it after the data dir's own databases are closed.
func (r *Replicator) Close(ctx context.Context) error {
	close(r.stop)
	r.done.Wait()
	err := r.Flush(ctx)
	err = errors.Join(err, r.files.Close())
	return errors.Join(err, r.store.Close(ctx))
}

// kept reports whether rel (slash-separated, relative to the data dir) is
// a file the replica keeps in files.db.
func kept(rel string, d fs.DirEntry) bool {
	first, _, _ := strings.Cut(rel, "/")
	if slices.Contains(skipDirs, first) || strings.HasSuffix(first, litestream.MetaDirSuffix) {
		return false
	}
	if d.IsDir() {
		return true
	}
	base := path.Base(rel)
	for _, suf := range []string{".db", ".db-wal", ".db-shm", ".db-journal", ".tmp"} {
		if strings.HasSuffix(base, suf) {
			return false
		}
	}
	return d.Type().IsRegular()
}

// snapshot brings files.db in step with the data dir's files: new and
// changed ones written, removed ones deleted, in one transaction.
func (r *Replicator) snapshot(ctx context.Context) error {
	type change struct {
		rel  string
		info fs.FileInfo
	}
	var changed []change
	present := map[string]bool{}
	err := filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		rel, _ := filepath.Rel(r.dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if !kept(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > MaxFile {
			return nil
		}
		present[rel] = true
		if s, ok := r.seen[rel]; ok && s.size == info.Size() && s.mtime.Equal(info.ModTime()) {
			return nil
		}
		changed = append(changed, change{rel, info})
		return nil
	})
	if err != nil {
		return err
	}
	var gone []string
	for rel := range r.seen {
		if !present[rel] {
			gone = append(gone, rel)
		}
	}
	if len(changed) == 0 && len(gone) == 0 {
		return nil
	}
	tx, err := r.files.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, c := range changed {
		data, err := os.ReadFile(filepath.Join(r.dir, filepath.FromSlash(c.rel)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		if _, err := tx.ExecContext(ctx, `INSERT INTO files (path, mode, sha256, data) VALUES (?, ?, ?, ?)
			ON CONFLICT (path) DO UPDATE SET mode = excluded.mode, sha256 = excluded.sha256, data = excluded.data
			WHERE files.sha256 != excluded.sha256 OR files.mode != excluded.mode`,
			c.rel, int64(c.info.Mode().Perm()), sum[:], data); err != nil {
			return err
		}
	}
	for _, rel := range gone {
		if _, err := tx.ExecContext(ctx, `DELETE FROM files WHERE path = ?`, rel); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, c := range changed {
		r.seen[c.rel] = fileStamp{c.info.Size(), c.info.ModTime()}
	}
	for _, rel := range gone {
		delete(r.seen, rel)
	}
	return nil
}

func openFiles(p string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+p+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(wal)&_pragma=synchronous(normal)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS files (
		path   TEXT PRIMARY KEY,
		mode   INTEGER NOT NULL,
		sha256 BLOB NOT NULL,
		data   BLOB NOT NULL
	)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return db, nil
}

// Restore brings a data dir back from base: each database named, and
// files.db's files in their places. dir must not hold a data dir already:
// a restore never overwrites one. A database the replica never had (a
// data dir that had not used it yet) is left to be created afresh.
func Restore(ctx context.Context, dir, base string, names []string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, n := range append(slices.Clone(names), FilesDB) {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return fmt.Errorf("%s already holds %s: restore into an empty data dir (a restore never overwrites one)", dir, n)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	restored := 0
	for _, n := range append(slices.Clone(names), FilesDB) {
		ru, err := replicaURL(base, n)
		if err != nil {
			return err
		}
		client, err := litestream.NewReplicaClientFromURL(ru)
		if err != nil {
			return fmt.Errorf("replica for %s: %w", n, err)
		}
		// An unopened DB only carries the logger to the restore.
		ldb := litestream.NewDB(filepath.Join(dir, n))
		ldb.SetLogger(log.With("db", n))
		rep := litestream.NewReplicaWithClient(ldb, client)
		opt := litestream.NewRestoreOptions()
		opt.OutputPath = filepath.Join(dir, n)
		opt.IntegrityCheck = litestream.IntegrityCheckQuick
		if err := rep.Restore(ctx, opt); err != nil {
			if errors.Is(err, litestream.ErrTxNotAvailable) || errors.Is(err, litestream.ErrNoSnapshots) {
				log.Info("replica: nothing to restore", "db", n)
				continue
			}
			return fmt.Errorf("restoring %s from %s: %w", n, base, err)
		}
		restored++
	}
	if restored == 0 {
		return fmt.Errorf("%s holds no replica of a data dir: check the URL (the one `serve --replicate` was given)", base)
	}
	return writeFiles(ctx, dir)
}

// writeFiles puts files.db's files back under dir.
func writeFiles(ctx context.Context, dir string) error {
	p := filepath.Join(dir, FilesDB)
	if _, err := os.Stat(p); err != nil {
		return nil
	}
	db, err := openFiles(p)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT path, mode, sha256, data FROM files`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var rel string
		var mode int64
		var sum, data []byte
		if err := rows.Scan(&rel, &mode, &sum, &data); err != nil {
			return err
		}
		got := sha256.Sum256(data)
		if string(got[:]) != string(sum) {
			return fmt.Errorf("replica: %s does not match its checksum", rel)
		}
		if !filepath.IsLocal(filepath.FromSlash(rel)) {
			return fmt.Errorf("replica: %q is not a path inside the data dir", rel)
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(dst, data, fs.FileMode(mode)&0o777); err != nil {
			return err
		}
	}
	return rows.Err()
}

// FlushWithin is Flush bounded by d, even once ctx is done: what a
// process ending runs last.
func (r *Replicator) FlushWithin(ctx context.Context, d time.Duration) error {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	return r.Flush(fctx)
}
