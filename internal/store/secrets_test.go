package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestStoreFilesPrivate: the database, its WAL and shared-memory file are
// 0600 while in use, whether the database is new or was left 0644.
func TestStoreFilesPrivate(t *testing.T) {
	ctx := context.Background()
	for _, existing := range []bool{false, true} {
		dir := t.TempDir()
		path := filepath.Join(dir, "state.db")
		if existing {
			s, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ID(ctx); err != nil { // a write: the WAL exists now
			t.Fatal(err)
		}
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if perm := fi.Mode().Perm(); perm != 0o600 {
				t.Errorf("existing=%v: %s mode %#o, want 0600", existing, filepath.Base(p), perm)
			}
		}
		s.Close()
	}
}

func TestSecrets(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.LoadSecret(ctx, "launch-f"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LoadSecret before any save = %v, want ErrNotFound", err)
	}
	if err := s.SaveSecret(ctx, "launch-f", []byte(`{"env":{"K":"v"}}`)); err != nil {
		t.Fatal(err)
	}
	b, err := s.LoadSecret(ctx, "launch-f")
	if err != nil || string(b) != `{"env":{"K":"v"}}` {
		t.Fatalf("LoadSecret = %q, %v", b, err)
	}
	for p, want := range map[string]os.FileMode{s.SecretPath("launch-f"): 0o600, filepath.Dir(s.SecretPath("launch-f")): 0o700} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %#o", p, fi.Mode(), err, want)
		}
	}
	for _, bad := range []string{"", "../x", "a/b", ".hidden"} {
		if err := s.SaveSecret(ctx, bad, nil); err == nil {
			t.Errorf("SaveSecret(%q) accepted", bad)
		}
	}
}
