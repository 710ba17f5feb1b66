package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
)

// fakeRunner records the commands the server runs and answers with a
// line; `up` waits until released (or cancelled).
type fakeRunner struct {
	mu      sync.Mutex
	ran     [][]string
	release chan struct{}
}

func (f *fakeRunner) run(ctx context.Context, args []string, out, errOut io.Writer) int {
	f.mu.Lock()
	f.ran = append(f.ran, args)
	f.mu.Unlock()
	if args[0] == "up" {
		fmt.Fprintf(errOut, "launching\n")
		select {
		case <-f.release:
			fmt.Fprintf(out, "cost report\n")
			return 0
		case <-ctx.Done():
			return 130
		}
	}
	fmt.Fprintf(out, "ran %s\n", strings.Join(args, " "))
	return 0
}

type fixture struct {
	t      *testing.T
	srv    *Server
	url    string
	db     *DB
	clk    *clock.Manual
	runner *fakeRunner
	states sync.Map
}

func newFixture(t *testing.T) *fixture { return newFixtureOn(t, openSQLite) }

func newFixtureOn(t *testing.T, open opener) *fixture {
	t.Helper()
	dir := t.TempDir()
	clk := clock.NewManual(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	db := open(t, clk)
	fx := &fixture{t: t, db: db, clk: clk, runner: &fakeRunner{release: make(chan struct{})}}
	fx.srv = New(Config{DB: db, Run: fx.runner.run, Dir: dir, ResultsDir: filepath.Join(dir, "results"), Version: "v-test", Clock: clk,
		JobState: func(ctx context.Context, id string) (string, error) {
			v, _ := fx.states.Load(id)
			s, _ := v.(string)
			return s, nil
		}})
	if err := fx.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(fx.srv.Handler())
	fx.url = ts.URL
	t.Cleanup(func() {
		close(fx.runner.release)
		ts.Close()
		fx.srv.Stop()
	})
	return fx
}

func (fx *fixture) client(role string) *Client {
	fx.t.Helper()
	tok, err := fx.db.CreateToken(context.Background(), role+"-user", role, 0)
	if err != nil {
		fx.t.Fatal(err)
	}
	return &Client{URL: fx.url, Token: tok, Version: "v-test"}
}

func bundle(t *testing.T) *bytes.Buffer {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.sh"), []byte("echo a\n"), 0o755)
	var b bytes.Buffer
	if err := Pack(&b, BundleSpec{Task: []byte("name: t\nworkdir: " + dir + "\nrun: sh a.sh\n"), Workdir: dir, Files: []string{"a.sh"}}); err != nil {
		t.Fatal(err)
	}
	return &b
}

// TestRolesAreEnforced: a viewer reads what an operator reads, and is
// refused (403, audited) submit, destroy, launch and down; identity comes
// from the token, whatever the request says.
func TestRolesAreEnforced(t *testing.T) {
	t.Parallel()
	rolesScenario(t, newFixture(t))
}

func rolesScenario(t *testing.T, fx *fixture) {
	ctx := context.Background()
	op, viewer := fx.client(RoleOperator), fx.client(RoleViewer)
	for _, c := range []*Client{op, viewer} {
		var out bytes.Buffer
		if code, err := c.Run(ctx, []string{"status", "--json"}, &out, io.Discard); err != nil || code != 0 || out.String() != "ran status --json\n" {
			t.Errorf("status: %d %v %q", code, err, out.String())
		}
	}
	for _, args := range [][]string{{"destroy", "--all", "--yes"}, {"launch", "--count=2"}, {"down", "j"}} {
		_, err := viewer.Run(ctx, args, io.Discard, io.Discard)
		var api *APIError
		if !errors.As(err, &api) || api.Status != http.StatusForbidden || !strings.Contains(err.Error(), "role viewer may not "+args[0]) {
			t.Errorf("viewer %v: %v, want 403", args, err)
		}
	}
	if _, err := viewer.Submit(ctx, "t", bundle(t), false); !errors.Is(err, ErrForbidden) {
		t.Errorf("viewer submit: %v, want 403", err)
	}
	id, err := op.Submit(ctx, "t", bundle(t), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--data-dir=/etc", "--api-key=k", "--api-url=http://x", "--market=vast", "-v", "../../etc", "a/b"} {
		if _, err := op.Run(ctx, []string{"status", flag}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "not taken by the server") && !strings.Contains(fmt.Sprint(err), "not a job's name") {
			t.Errorf("a global flag or a path through the server (%s): %v", flag, err)
		}
	}
	if _, err := viewer.Audit(ctx); !errors.Is(err, ErrForbidden) {
		t.Errorf("viewer audit: %v", err)
	}
	log, err := op.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range log {
		lines = append(lines, e.Who+" "+e.Action+" "+e.Outcome)
	}
	want := []string{"viewer-user destroy denied", "viewer-user launch denied", "viewer-user down denied",
		"viewer-user submit denied", "operator-user submit queued", "viewer-user audit denied"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	rows, err := viewer.Jobs(ctx)
	if err != nil || len(rows) != 1 || rows[0].ID != id || rows[0].SubmittedBy != "operator-user" {
		t.Errorf("jobs seen by the viewer: %+v %v", rows, err)
	}
}

// TestBadCredentialsAndVersions: no token, an unknown one, a revoked one
// and an expired one get 401 with a message that says which; a client of
// another version gets a version error naming both.
func TestBadCredentialsAndVersions(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	ctx := context.Background()
	c := fx.client(RoleOperator)
	if _, err := c.Whoami(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fx.db.RevokeToken(ctx, "operator-user"); err != nil {
		t.Fatal(err)
	}
	short, err := fx.db.CreateToken(ctx, "short", RoleViewer, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sc := &Client{URL: fx.url, Token: short, Version: "v-test"}
	if _, err := sc.Whoami(ctx); err != nil {
		t.Fatal(err)
	}
	fx.clk.Advance(time.Hour)
	for _, tc := range []struct {
		c    *Client
		want string
	}{
		{c, "API token revoked (token \"operator-user\""},
		{sc, "API token expired (token \"short\""},
		{&Client{URL: fx.url, Token: "vfs_nope", Version: "v-test"}, "API token not recognised"},
		{&Client{URL: fx.url, Version: "v-test"}, "no API token"},
	} {
		_, err := tc.c.Whoami(ctx)
		var api *APIError
		if !errors.As(err, &api) || api.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want 401 %q", err, tc.want)
		}
	}
	old := fx.client(RoleViewer)
	old.Version = "v-old"
	_, err = old.Whoami(ctx)
	var api *APIError
	if !errors.As(err, &api) || api.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "this server is vastfleet v-test, the client is v-old") {
		t.Errorf("old client: %v", err)
	}
}

// TestSubmittedJobRunsAndIsFollowed: a job runs as `up` on its unpacked
// task file; a follower sees its output and exit code; down of a running
// job stops its up (nodes kept) and runs down.
func TestSubmittedJobRunsAndIsFollowed(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	ctx := context.Background()
	op := fx.client(RoleOperator)
	id, err := op.Submit(ctx, "t", bundle(t), false)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code, err := op.Follow(ctx, id, &out, &errOut, nil)
		if err != nil {
			t.Error(err)
		}
		done <- code
	}()
	fx.runner.release <- struct{}{}
	if code := <-done; code != 0 || out.String() != "cost report\n" || !strings.Contains(errOut.String(), "launching") {
		t.Errorf("exit %d, out %q, err %q", code, out.String(), errOut.String())
	}
	fx.runner.mu.Lock()
	up := fx.runner.ran[0]
	fx.runner.mu.Unlock()
	task := up[1]
	if b, err := os.ReadFile(task); err != nil || !strings.Contains(string(b), "workdir: workdir") {
		t.Errorf("task file on the server %s: %q %v", task, b, err)
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(task), WorkdirName, "a.sh")); err != nil || string(b) != "echo a\n" {
		t.Errorf("workdir on the server: %q %v", b, err)
	}

	// A second job, ended by down while its up runs.
	id2, err := op.Submit(ctx, "t", bundle(t), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { fx.runner.mu.Lock(); defer fx.runner.mu.Unlock(); return len(fx.runner.ran) == 2 })
	fx.states.Store(id2, "running")
	out.Reset()
	code, err := op.Run(ctx, []string{"down", id2}, &out, io.Discard)
	if err != nil || code != 0 || out.String() != "ran down "+id2+"\n" {
		t.Errorf("down: %d %v %q", code, err, out.String())
	}
	rows, _ := op.Jobs(ctx)
	if len(rows) != 2 || rows[1].State != JobEnded {
		t.Errorf("jobs %+v", rows)
	}
}

// TestNoDatabaseNoNewWork: a server whose database does not answer
// refuses requests with 503 and says why, queueing nothing.
func TestNoDatabaseNoNewWork(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	ctx := context.Background()
	op := fx.client(RoleOperator)
	fx.db.Close()
	_, err := op.Submit(ctx, "t", bundle(t), false)
	var api *APIError
	if !errors.As(err, &api) || api.Status != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "database does not answer") {
		t.Errorf("submit without a database: %v", err)
	}
	fx.runner.mu.Lock()
	defer fx.runner.mu.Unlock()
	if len(fx.runner.ran) != 0 {
		t.Errorf("ran %v", fx.runner.ran)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// TestUnpackRefusesEscapes: a bundle naming a file outside its directory
// is refused.
func TestUnpackRefusesEscapes(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := Pack(&b, BundleSpec{Task: []byte("name: t\n")}); err != nil {
		t.Fatal(err)
	}
	if err := Unpack(&b, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../x", "workdir/../../x", "/etc/x", "other"} {
		var e bytes.Buffer
		gz := gzip.NewWriter(&e)
		tw := tar.NewWriter(gz)
		for _, n := range []string{TaskName, name} {
			tw.WriteHeader(&tar.Header{Name: n, Mode: 0o600, Size: 1, Typeflag: tar.TypeReg})
			tw.Write([]byte("x"))
		}
		tw.Close()
		gz.Close()
		if err := Unpack(&e, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a file the bundle may hold") {
			t.Errorf("unpack %s: %v", name, err)
		}
	}
}
