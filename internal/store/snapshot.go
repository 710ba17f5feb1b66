package store

import (
	"context"
	"fmt"
	"os"
)

// Snapshot copies the database, in one consistent read, to a new file at
// path (which must not exist) and opens the copy. Commands that only look
// reconcile the copy with the marketplace and show the result: they never
// write the real store and never wait for the process that writes it.
func (s *Store) Snapshot(ctx context.Context, path string) (*Store, error) {
	if _, err := s.db.ExecContext(ctx, "VACUUM INTO ?", path); err != nil {
		return nil, fmt.Errorf("store: copying %s: %w", s.path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return Open(ctx, path)
}
