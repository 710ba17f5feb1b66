package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWholeOrNotAtAll(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	if err := WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A writer that fails half-way leaves the old content and no stray file.
	boom := errors.New("disk full")
	err := Write(path, 0o600, func(w io.Writer) error {
		w.Write([]byte("new but incompl"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want the fill error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("after a failed write the file holds %q, want the old content", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
	if err := WriteFile(path, []byte("new"), 0o640); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if b, _ := os.ReadFile(path); string(b) != "new" || st.Mode().Perm() != 0o640 {
		t.Fatalf("file holds %q mode %v, want new 0640", b, st.Mode().Perm())
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x"), nil, 0o600); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
}
