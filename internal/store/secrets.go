package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
)

// secretsDir holds what must survive for a resume but must not sit in the
// database, where every backup, export and `sqlite3 .dump` would carry it:
// a launch's env values and onstart script. One 0600 file per name, in a
// 0700 directory beside the database.
const secretsDir = "secrets"

func (s *Store) secretPath(name string) (string, error) {
	if name == "" || len(name) > 128 || filepath.Base(name) != name || name[0] == '.' {
		return "", fmt.Errorf("store: secret name %q", name)
	}
	return filepath.Join(filepath.Dir(s.path), secretsDir, name+".json"), nil
}

// SaveSecret keeps data under name, readable by this user only, replacing
// what was there.
func (s *Store) SaveSecret(ctx context.Context, name string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	path, err := s.secretPath(name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("store: secret %s: %w", name, err)
	}
	return nil
}

// LoadSecret returns what SaveSecret kept under name; ErrNotFound (wrapped)
// when there is none.
func (s *Store) LoadSecret(ctx context.Context, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path, err := s.secretPath(name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("store: secret %s (%s): %w", name, path, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: secret %s: %w", name, err)
	}
	return b, nil
}

// SecretPath is where the secret name is kept, for messages.
func (s *Store) SecretPath(name string) string {
	p, _ := s.secretPath(name)
	return p
}

// privateFiles tightens the database and its WAL and shared-memory files
// to 0600 and creates the database file that way when it is new. SQLite
// creates its WAL and -shm files with the database file's mode, so a
// private database keeps them private too; files left by an older
// vastfleet (0644 under a usual umask) are tightened.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}
