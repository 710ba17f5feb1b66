package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/server/pgtest"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// newFakeClock is the injected clock of the tests.
func newFakeClock() *clock.Manual {
	return clock.NewManual(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
}

// rig is a coordinator on a real database (a SQLite file, or a
// PostgreSQL database) behind a real loopback server.
type rig struct {
	t      *testing.T
	store  testStore
	dbPath string // the SQLite file ("" on PostgreSQL)
	db     *DB
	srv    *Server
	http   *httptest.Server
	agent  string // fleet "alpha"'s bootstrap token
	viewer string
	creds  map[string]string // node → credential, enrolled by node
	nextID int64
}

// testMembers lets instances 1..999 of any fleet enroll; instance N runs
// on machine 100+N, or on the machine sameMachine maps it to.
type testMembers struct{ sameMachine map[int64]int64 }

func (m testMembers) Instances(ctx context.Context, fleet string) (map[int64]Instance, error) {
	out := map[int64]Instance{}
	for id := int64(1); id < 1000; id++ {
		machine := 100 + id
		if mm, ok := m.sameMachine[id]; ok {
			machine = mm
		}
		out[id] = Instance{MachineID: machine, Image: "img"}
	}
	return out, nil
}

// node is the credential of the named node of fleet alpha, enrolling it
// (as the next instance id) the first time.
func (r *rig) node(name string) string {
	r.t.Helper()
	if tok, ok := r.creds[name]; ok {
		return tok
	}
	r.nextID++
	tok := r.enroll("alpha", r.agent, r.nextID, name)
	r.creds[name] = tok
	return tok
}

// nodeAs is node enrolled as instance id (0: the next free one).
func (r *rig) nodeAs(name string, id int64) string {
	r.t.Helper()
	if _, ok := r.creds[name]; ok || id == 0 {
		return r.node(name)
	}
	tok := r.enroll("alpha", r.agent, id, name)
	r.creds[name] = tok
	return tok
}

// enroll trades a bootstrap token for instance id's credential.
func (r *rig) enroll(fleet, bootstrap string, id int64, name string) string {
	r.t.Helper()
	var rep wire.EnrollReply
	code, _ := r.do("POST", wire.PathEnroll, bootstrap, wire.EnrollRequest{Fleet: fleet, InstanceID: id, Node: name}, &rep)
	if code != http.StatusOK || rep.Token == "" || rep.Node != name {
		r.t.Fatalf("enrolling %s as instance %d: %d %+v", name, id, code, rep)
	}
	return rep.Token
}

func openTestDB(t testing.TB, path string) *DB {
	t.Helper()
	db, err := OpenDB(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// The backends the coordinator's store runs on.
const (
	sqliteBackend   = "sqlite"
	postgresBackend = "postgres"
)

var backends = []string{sqliteBackend, postgresBackend}

// testStore is where a test's coordinator database lives: a SQLite file,
// or a fresh database in the test PostgreSQL (which skips the test where
// there is none, unless VASTFLEET_REQUIRE_POSTGRES is set). durable asks
// for a PostgreSQL that syncs every commit, for benchmarks.
type testStore struct{ where, tokens string }

func newTestStore(t testing.TB, backend string, durable bool) testStore {
	t.Helper()
	dir := t.TempDir()
	switch {
	case backend == sqliteBackend:
		return testStore{where: filepath.Join(dir, "coord.db"), tokens: filepath.Join(dir, "coord.db-tokens.json")}
	case durable:
		return testStore{where: pgtest.DurableDSN(t), tokens: filepath.Join(dir, "tokens.json")}
	default:
		return testStore{where: pgtest.DSN(t), tokens: filepath.Join(dir, "tokens.json")}
	}
}

// open opens the store (again).
func (s testStore) open(t testing.TB) *DB {
	t.Helper()
	db, err := Open(context.Background(), s.where, s.tokens)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// openBackend is a fresh coordinator database on backend, closed when
// the test ends.
func openBackend(t testing.TB, backend string) *DB {
	t.Helper()
	db := newTestStore(t, backend, false).open(t)
	t.Cleanup(func() { db.Close() })
	return db
}

// newRig starts a coordinator on SQLite; edit adjusts its Config.
func newRig(t *testing.T, edit func(*Config)) *rig { return newRigOn(t, sqliteBackend, edit) }

// newRigOn is newRig on backend.
func newRigOn(t *testing.T, backend string, edit func(*Config)) *rig {
	t.Helper()
	r := &rig{t: t, store: newTestStore(t, backend, false), creds: map[string]string{}}
	if backend == sqliteBackend {
		r.dbPath = r.store.where
	}
	r.db = r.store.open(t)
	t.Cleanup(func() { r.db.Close() })
	var err error
	r.agent, r.viewer, err = r.db.FleetTokens(context.Background(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	r.start(edit)
	return r
}

func (r *rig) start(edit func(*Config)) {
	cfg := Config{DB: r.db, Members: testMembers{}}
	if edit != nil {
		edit(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.srv = srv
	r.http = httptest.NewServer(srv.Handler())
	r.t.Cleanup(func() {
		r.http.CloseClientConnections()
		r.http.Close()
		srv.Close()
	})
}

// do sends a request and decodes a JSON answer into out when given.
func (r *rig) do(method, path, token string, body any, out any) (int, http.Header) {
	r.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		j, err := json.Marshal(b)
		if err != nil {
			r.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, r.http.URL+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.http.Client().Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			r.t.Fatalf("%s %s: decoding %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, resp.Header
}

func heartbeat(fleet, node string) wire.Heartbeat {
	return wire.Heartbeat{
		Fleet: fleet, Node: node, Seq: 1, SentAt: time.Now(),
		CPUPercent: 400, CPUCores: 8, RAMUsedBytes: 1 << 30, RAMTotalBytes: 16 << 30,
		Metrics: map[string]float64{"keys_per_s": 1000},
	}
}

func findings(fleet, node string, keys ...string) wire.Findings {
	fs := wire.Findings{Fleet: fleet, Node: node}
	for _, k := range keys {
		fs.Items = append(fs.Items, wire.Finding{Key: k, Session: "search", At: time.Now(),
			Data: json.RawMessage(fmt.Sprintf(`{"key":%q}`, k))})
	}
	return fs
}

func countRows(t testing.TB, db *DB, fleet string) (rows, distinct int64) {
	t.Helper()
	err := db.db.QueryRowContext(context.Background(), `SELECT count(*), count(DISTINCT key) FROM findings WHERE fleet = ?`, fleet).Scan(&rows, &distinct)
	if err != nil {
		t.Fatal(err)
	}
	return rows, distinct
}

// metrics is the coordinator's /metrics page as the viewer scrapes it.
func (r *rig) metrics() string {
	r.t.Helper()
	req, _ := http.NewRequest("GET", r.http.URL+wire.PathMetrics, nil)
	req.Header.Set("Authorization", "Bearer "+r.viewer)
	resp, err := r.http.Client().Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
