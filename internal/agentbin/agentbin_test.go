package agentbin

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeSelf is a stand-in for the running vastfleet binary: its content is
// the cache key, and nothing sits beside it.
func fakeSelf(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vastfleet")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFlagAndBesideWin(t *testing.T) {
	t.Parallel()
	self := fakeSelf(t, "main")
	f, err := Find(t.Context(), Options{Flag: "/x/agent", Self: self})
	if err != nil || f.Path != "/x/agent" || f.How != FromFlag {
		t.Errorf("flag: %+v %v", f, err)
	}
	beside := filepath.Join(filepath.Dir(self), Name)
	if err := os.WriteFile(beside, []byte("agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err = Find(t.Context(), Options{Self: self, CacheDir: t.TempDir()})
	if err != nil || f.Path != beside || f.How != Beside || f.Warning != "" {
		t.Errorf("beside: %+v %v", f, err)
	}
}

// Issue 28: after `go install` or `go run` no vastfleet-agent sits beside
// vastfleet, and the main binary (21.7-31.5 MiB) went out as the agent.
// From a checkout the small agent is built once into the cache, then
// reused; the main binary is served only when nothing can be built, and
// then with a warning that says how to do better.
func TestBuildsTheSmallAgentOnce(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain")
	}
	src, err := source(t.Context())
	if err != nil {
		t.Fatalf("this test binary was built from a checkout, yet: %v", err)
	}
	self := fakeSelf(t, "vastfleet built "+t.Name())
	cache := t.TempDir()
	var logs []string
	o := Options{Self: self, CacheDir: cache, Arch: runtime.GOARCH, Log: func(s string) { logs = append(logs, s) }}
	f, err := Find(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if f.How != Built || f.Warning != "" || !strings.HasPrefix(f.Path, cache) {
		t.Fatalf("found %+v, want the agent built into %s from %s", f, cache, src)
	}
	b, err := os.ReadFile(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x7fELF")) {
		t.Errorf("%s is not a Linux executable", f.Path)
	}
	if mib := float64(len(b)) / (1 << 20); mib >= 10 {
		t.Errorf("the built agent is %.1f MiB, want the small agent (< 10 MiB)", mib)
	}
	t.Logf("built %s: %.2f MiB", f.Path, float64(len(b))/(1<<20))
	if len(logs) != 1 || !strings.Contains(logs[0], "building the small agent") {
		t.Errorf("the build was not announced: %q", logs)
	}
	again, err := Find(t.Context(), o)
	if err != nil || again.How != Cached || again.Path != f.Path {
		t.Errorf("second find %+v %v, want the cached %s", again, err, f.Path)
	}
	if len(logs) != 1 {
		t.Errorf("built twice: %q", logs)
	}
	// Another vastfleet binary gets its own build; no source, no build:
	// the main binary, with the warning.
	other := fakeSelf(t, "another vastfleet")
	last, err := Find(t.Context(), Options{Self: other, CacheDir: cache, Source: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if last.How != MainBinary || last.Path != other || !strings.Contains(last.Warning, "go build") || !strings.Contains(last.Warning, "--agent-bin") {
		t.Errorf("last resort %+v", last)
	}
}

// A relative cache folder (vastfleet --data-dir d) is this process's, not
// the source tree's, where go build runs: the agent was built into the
// checkout and then not found.
func TestBuildsIntoARelativeCache(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain")
	}
	self := fakeSelf(t, "vastfleet built "+t.Name())
	wd := t.TempDir()
	t.Chdir(wd)
	f, err := Find(t.Context(), Options{Self: self, CacheDir: filepath.Join("d", "cache"), Arch: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	if f.How != Built || !strings.HasPrefix(f.Path, filepath.Join(wd, "d", "cache")) {
		t.Fatalf("found %+v, want the agent built into %s", f, filepath.Join(wd, "d", "cache"))
	}
	if _, err := os.Stat(f.Path); err != nil {
		t.Fatal(err)
	}
}
