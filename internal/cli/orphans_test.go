package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A deleted state store used to open as a new, empty one while three
// instances billed: ls said "no instances" and cost and destroy --all
// skipped them. Now the loss is said loudly, the three are shown as
// orphans, and adoption brings them back under destroy --all.
func TestLostStoreShowsOrphansAndAdoptsThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("launch", "--count", "3", "--deadline", "60m", "--fleet", "lost", "--image", "ubuntu:22.04", "-n", launchQuery)
	launched := decode[[]map[string]any](t, e.ok("ls", "--json").out)
	if len(launched) != 3 {
		t.Fatalf("launched %d instances, want 3", len(launched))
	}
	ids := map[float64]bool{}
	for _, r := range launched {
		ids[r["id"].(float64)] = true
	}

	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(e.home, "state.db"+suffix)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}

	r := e.ok("ls")
	for _, want := range []string{"state.db is missing", "3 instance(s) on this account carry vastfleet labels", "reconcile --adopt"} {
		if !strings.Contains(r.err, want) {
			t.Errorf("ls after losing the store: stderr lacks %q:\n%s", want, r.err)
		}
	}
	if !strings.Contains(r.out, "ORPHANS") {
		t.Errorf("ls shows no orphans section:\n%s", r.out)
	}
	rows := decode[[]map[string]any](t, e.ok("ls", "--json").out)
	orphans := 0
	for _, row := range rows {
		if row["orphan"] == true && ids[row["id"].(float64)] && row["fleet"] == "lost" && row["own_data_dir"] == true {
			orphans++
		}
	}
	if orphans != 3 || len(rows) != 3 {
		t.Fatalf("ls --json: %d rows, %d of them the launched instances marked orphan; want 3 and 3\n%v", len(rows), orphans, rows)
	}
	cost := decode[map[string]any](t, e.ok("cost", "--json").out)
	if got := cost["orphans"].([]any); len(got) != 3 {
		t.Errorf("cost --json shows %d orphans, want 3", len(got))
	}
	if r := e.ok("cost"); !strings.Contains(r.out, "ORPHANS") {
		t.Errorf("cost shows no orphans section:\n%s", r.out)
	}

	r = e.ok("reconcile", "--adopt")
	if strings.Count(r.out, "adopted") != 3 {
		t.Errorf("reconcile --adopt did not adopt 3:\n%s", r.out)
	}
	rows = decode[[]map[string]any](t, e.ok("ls", "--json").out)
	tracked := 0
	for _, row := range rows {
		if row["orphan"] == nil && ids[row["id"].(float64)] && row["fleet"] == "lost" {
			tracked++
		}
	}
	if tracked != 3 || len(rows) != 3 {
		t.Fatalf("after adopting: ls shows %d rows, %d tracked launched instances; want 3 and 3\n%v", len(rows), tracked, rows)
	}
	if r := e.ok("ls"); strings.Contains(r.err, "WARNING") {
		t.Errorf("ls still warns after adopting:\n%s", r.err)
	}

	e.ok("destroy", "--all", "--yes", "--force")
	if rows := decode[[]map[string]any](t, e.ok("ls", "--json").out); len(rows) != 0 {
		t.Fatalf("after destroy --all: ls shows %v", rows)
	}
	if r := e.ok("reconcile"); strings.Contains(r.out, "orphan") || strings.Contains(r.err, "WARNING") {
		t.Errorf("a reconcile after destroy --all still finds orphans:\n%s%s", r.out, r.err)
	}
}

// An empty (0-byte) store file in a data dir that had one is reported too.
func TestEmptyStoreFileIsReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("reconcile") // a writer: the data dir now has had a store
	if err := os.Remove(filepath.Join(e.home, "state.db-wal")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(e.home, "state.db-shm"))
	if err := os.Truncate(filepath.Join(e.home, "state.db"), 0); err != nil {
		t.Fatal(err)
	}
	if r := e.ok("ls"); !strings.Contains(r.err, "is empty (0 bytes)") {
		t.Errorf("ls on an emptied store: stderr %q, want it reported", r.err)
	}
}
