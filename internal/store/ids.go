package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// idsFile lists, one a line, the id of every state store a data dir has
// had. It lives beside the database, not in it, so that when the database
// is lost (deleted, emptied, its WAL gone) the data dir still knows that
// it had state and which labels were its own.
const idsFile = "store-ids"

// FormerIDs reads the store ids the data dir dir has recorded.
func FormerIDs(dir string) ([]string, error) {
	fh, err := os.Open(filepath.Join(dir, idsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var ids []string
	sc := bufio.NewScanner(io.LimitReader(fh, 1<<20))
	for sc.Scan() {
		if id := strings.TrimSpace(sc.Text()); id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, sc.Err()
}

// RememberID appends id to the data dir's list, once (known is the list
// as read).
func RememberID(dir, id string, known []string) error {
	if slices.Contains(known, id) {
		return nil
	}
	fh, err := os.OpenFile(filepath.Join(dir, idsFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(fh, id); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// Lost says, before the database at path is opened, how its file was lost
// ("is missing", "is empty (0 bytes)") when the data dir dir had a store;
// empty when it was not. ids are the data dir's former store ids.
func Lost(dir, path string) (ids []string, what string) {
	ids, err := FormerIDs(dir)
	if err != nil || len(ids) == 0 {
		return nil, ""
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		what = "is missing"
	case err == nil && fi.Size() == 0:
		what = "is empty (0 bytes)"
	}
	return ids, what
}
