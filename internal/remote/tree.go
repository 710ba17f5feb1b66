package remote

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vastfleet/vastfleet/internal/ignore"
)

// TreeFile is one file of a local tree to sync.
type TreeFile struct {
	Rel  string // slash-separated, relative to the tree's root
	Hash string // hex SHA-256 of the content
	Mode fs.FileMode
	Size int64
}

// IgnoreFiles are read in every directory of a synced tree, in this
// order, so that a .vastfleetignore can re-include what .gitignore leaves
// out (a dataset git does not track but the nodes need).
var IgnoreFiles = []string{".gitignore", ".vastfleetignore"}

// ScanTree hashes every regular file under root that the rules leave in.
// Three layers decide, each over the one before: defaults, then the
// ignore files found in the tree (a deeper file over a shallower one, as
// git orders them), then extra (the command line). An ignored directory
// is not entered, so nothing under it can be re-included, as in git.
// Sync's own files on the node are never part of the tree.
func ScanTree(root string, defaults, extra []ignore.Rule) ([]TreeFile, error) {
	var files []TreeFile
	var found []ignore.Rule
	ignored := func(rel string, dir bool) bool {
		if strings.HasPrefix(rel, SyncManifest) { // the manifest and archives in DEST
			return true
		}
		for _, layer := range [][]ignore.Rule{extra, found, defaults} {
			if ign, matched := ignore.Decide(layer, rel, dir); matched {
				return ign
			}
		}
		return false
	}
	// A root that is a symlink to a directory is that directory (WalkDir
	// would see the link itself); links inside the tree are not followed.
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		} else if ignored(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			for _, name := range IgnoreFiles {
				b, err := os.ReadFile(filepath.Join(p, name))
				if errors.Is(err, fs.ErrNotExist) {
					continue
				} else if err != nil {
					return err
				}
				found = append(found, ignore.Parse(rel, string(b))...)
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		hash, size, err := hashFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, TreeFile{Rel: rel, Hash: hash, Mode: info.Mode().Perm(), Size: size})
		return nil
	})
	return files, err
}

func hashFile(p string) (string, int64, error) {
	fh, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer fh.Close()
	h := sha256.New()
	n, err := io.Copy(h, fh)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
