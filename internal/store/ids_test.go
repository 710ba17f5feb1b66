package store

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestStoreIDsOutliveTheDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	if ids, what := Lost(dir, db); ids != nil || what != "" {
		t.Fatalf("a fresh data dir: %q %q, want nothing lost", ids, what)
	}
	if err := RememberID(dir, "aaaa1111", nil); err != nil {
		t.Fatal(err)
	}
	known, err := FormerIDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := RememberID(dir, "aaaa1111", known); err != nil { // once
		t.Fatal(err)
	}
	if err := RememberID(dir, "bbbb2222", known); err != nil {
		t.Fatal(err)
	}
	if ids, what := Lost(dir, db); !slices.Equal(ids, []string{"aaaa1111", "bbbb2222"}) || what != "is missing" {
		t.Errorf("database gone: %q %q", ids, what)
	}
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, what := Lost(dir, db); what != "is empty (0 bytes)" {
		t.Errorf("empty database: %q", what)
	}
	if err := os.WriteFile(db, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ids, what := Lost(dir, db); len(ids) != 2 || what != "" {
		t.Errorf("database there: %q %q", ids, what)
	}
}
