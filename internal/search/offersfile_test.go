package search

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// --from - read stdin into a growing buffer: 3-4 times slower than --from
// FILE and 1.8 times the memory (issue 28). Stdin, a pipe or a file, is
// now mapped as a file is: the same bytes, no copy on the heap, and no
// spool file left behind.
func TestOffersFromStdinAreMappedNotCopied(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("mapped only where mmap is wired (linux)")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	const size = 16 << 20
	want := bytes.Repeat([]byte(`{"id": 1, "dph_total": 0.5},`), size/28)
	file := filepath.Join(tmp, "offers.json")
	if err := os.WriteFile(file, want, 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(name string, open func() *os.File) {
		t.Helper()
		in := open()
		defer in.Close()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		data, release, err := ReadOffersFile(in, "-")
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(data, want) {
			t.Errorf("%s: %d bytes read, want the %d written", name, len(data), len(want))
		}
		release()
		// A copy allocates at least the input (ReadAll: about twice);
		// half of it leaves room for what other goroutines allocate.
		if heap := after.TotalAlloc - before.TotalAlloc; heap > size/2 {
			t.Errorf("%s: %d MiB allocated on the heap for a %d MiB input: stdin was copied, not mapped", name, heap>>20, size>>20)
		}
	}
	check("stdin from a file", func() *os.File {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		return f
	})
	check("stdin from a pipe", func() *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			w.Write(want)
			w.Close()
		}()
		return r
	})
	left, _ := os.ReadDir(tmp)
	for _, e := range left {
		if strings.HasPrefix(e.Name(), "vastfleet-offers-") {
			t.Errorf("spool file %s left behind", e.Name())
		}
	}
}
