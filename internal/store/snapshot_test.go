package store

import (
	"os"
	"path/filepath"
	"testing"
)

// A snapshot holds what was committed when it was taken, is private to its
// owner, and changes to it never reach the store it was copied from.
func TestSnapshotIsAConsistentPrivateCopy(t *testing.T) {
	s, _ := openTest(t)
	ctx := t.Context()
	if err := s.SetMeta(ctx, "k", "before"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "view.db")
	snap, err := s.Snapshot(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot file: %v, %v; want mode 0600", fi, err)
	}
	if err := s.SetMeta(ctx, "k", "after"); err != nil {
		t.Fatal(err)
	}
	if v, err := snap.GetMeta(ctx, "k"); err != nil || v != "before" {
		t.Fatalf("snapshot has k=%q (%v), want what was committed when it was taken", v, err)
	}
	if err := snap.SetMeta(ctx, "k", "in the copy"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetMeta(ctx, "k"); err != nil || v != "after" {
		t.Fatalf("store has k=%q (%v) after the copy was written", v, err)
	}
	if _, err := s.Snapshot(ctx, path); err == nil {
		t.Fatal("a snapshot over an existing file succeeded")
	}
}
