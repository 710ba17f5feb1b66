//go:build unix

package vast

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A FIFO at the key file's path used to hang the command forever (open
// blocks until a writer comes). It is refused without being opened.
func TestKeyFileThatIsNotRegularIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vast_api_key")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ResolveAPIKey("", func(string) string { return "" }, dir)
		done <- err
	}()
	// No writer ever opens the FIFO: a blocking open would never return,
	// and the test binary's own timeout would report it.
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("FIFO key file: %v; want a refusal naming it not a regular file", err)
	}
	// A symlink to a FIFO is refused too; a symlink to a regular file works.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readKeyFile(link); err == nil {
		t.Fatal("symlink to a FIFO was read")
	}
	real := filepath.Join(dir, "real")
	if err := os.WriteFile(real, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(link)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if k, _, err := readKeyFile(link); err != nil || k != "k" {
		t.Fatalf("symlink to a regular file: %q, %v", k, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readKeyFile(filepath.Join(dir, "d")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory as key file: %v", err)
	}
}
