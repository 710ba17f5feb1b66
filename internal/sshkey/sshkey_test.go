package sshkey

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadOrCreateKeepsOneKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "id_ed25519")
	first, err := LoadOrCreate(path, "test")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Fatalf("files beside the key: %v", ents)
	}
	os.Chmod(path, 0o644)
	again, err := LoadOrCreate(path, "test")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.PublicKey().Marshal(), again.PublicKey().Marshal()) {
		t.Fatal("a second LoadOrCreate made a new key")
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("a 0644 key stays %v, want 0600", st.Mode().Perm())
	}
}

func TestLoadOrCreateRefusesAnEmptyKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "id_ed25519")
	os.WriteFile(path, nil, 0o600)
	// An existing file is never silently replaced: it may be the key the
	// fleet's instances trust.
	if _, err := LoadOrCreate(path, "test"); err == nil || !strings.Contains(err.Error(), "move it away") {
		t.Fatalf("err = %v, want a parse error that says how to recover", err)
	}
}
