package job

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/jobfile"
)

// TestCheckBeforeRenting: what would fail only on a rented node fails
// first.
func TestCheckBeforeRenting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The sync's own reading of a tree: every file opened.
	scan := func(root string) error {
		return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			fh, err := os.Open(p)
			if err == nil {
				fh.Close()
			}
			return err
		})
	}
	file := filepath.Join(dir, "f.txt")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, tc := range []struct {
		workdir, want string
	}{
		{filepath.Join(dir, "missing"), "no such file"},
		{file, "not a directory"},
		{dir, ""},
	} {
		err := Check(&jobfile.Job{Workdir: tc.workdir}, scan)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was rented")) {
			t.Errorf("workdir %s: %v, want %q", tc.workdir, err, tc.want)
		}
	}
	if os.Geteuid() != 0 { // root reads any file
		locked := filepath.Join(dir, "locked")
		os.WriteFile(locked, []byte("x"), 0o000)
		if err := Check(&jobfile.Job{Workdir: dir}, scan); err == nil {
			t.Error("an unreadable file in the workdir passed the check")
		}
	}
}
