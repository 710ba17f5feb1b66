package remote

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vastfleet/vastfleet/internal/ignore"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestScanTreeHonoursIgnoreFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		".gitignore":        "*.log\n/build/\nsecrets.env\ncache/**\n",
		".vastfleetignore":  "!keep.log\n!data/\n",
		"train.py":          "x",
		"run.log":           "x",
		"keep.log":          "x",
		"build/out.bin":     "x",
		"src/build/ok.py":   "x", // /build/ is anchored at the root
		"src/debug.log":     "x",
		"secrets.env":       "x",
		"cache/a/b.npy":     "x",
		"data/small.csv":    "x", // default-excluded, re-included by .vastfleetignore
		"model.pt":          "x",
		"__pycache__/m.pyc": "x",
		"sub/.gitignore":    "*.tmp\n!important.tmp\n",
		"sub/x.tmp":         "x",
		"sub/important.tmp": "x",
		"other/y.tmp":       "x", // sub's .gitignore does not reach here
		"notes/draft.md":    "x",
		".vastfleet-sync":   "stale manifest",
	})
	defaults := ignore.Parse("", "*.pt\n__pycache__\n.git\ndata/\nwandb/\noutputs/")
	extra := ignore.Parse("", "notes/")
	files, err := ScanTree(root, defaults, extra)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Rel)
	}
	want := []string{".gitignore", ".vastfleetignore", "data/small.csv", "keep.log", "other/y.tmp",
		"src/build/ok.py", "sub/.gitignore", "sub/important.tmp", "train.py"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("synced %v\nwant   %v", got, want)
	}
}

// An --exclude beats a re-include in the tree's files.
func TestScanTreeCommandLineOverTreeFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{".vastfleetignore": "!*.pt\n", "a.pt": "x", "b.py": "x"})
	defaults := ignore.Parse("", "*.pt")
	files, err := ScanTree(root, defaults, nil)
	if err != nil || len(files) != 3 {
		t.Fatalf("re-included: %v %v", files, err)
	}
	files, err = ScanTree(root, defaults, ignore.Parse("", "*.pt"))
	if err != nil || len(files) != 2 {
		t.Fatalf("--exclude over the tree's files: %v %v", files, err)
	}
}

// A workdir given as a symlink to a directory syncs the directory's files.
func TestScanTreeFollowsASymlinkedRoot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.MkdirAll(filepath.Join(real, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.sh", "sub/b.txt"} {
		if err := os.WriteFile(filepath.Join(real, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	files, err := ScanTree(link, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Rel)
	}
	if !slices.Equal(got, []string{"a.sh", "sub/b.txt"}) {
		t.Errorf("scanned %q, want a.sh and sub/b.txt", got)
	}
}
