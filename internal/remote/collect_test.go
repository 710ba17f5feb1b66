package remote

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// collectGuard runs Collect and fails the test if it has not returned
// after a minute: a collect that blocks on a FIFO never returns.
func collectGuard(t *testing.T, ctx context.Context, p *Pool, remoteDir string, nodes []CollectNode) ([]CollectResult, error) {
	t.Helper()
	type out struct {
		res []CollectResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := Collect(ctx, p, remoteDir, nodes, CollectOptions{Parallel: 4})
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(time.Minute):
		t.Fatal("collect hung")
		return nil, nil
	}
}

// A hostile node lists names outside the results directory (.., an
// absolute path, through a symlink here), with the right hash of a local
// file and a wrong one, lists a name that is a FIFO here, and sends an
// archive of escapes, links and special files. Collect asks for no name
// outside the directory and asks the same whatever the hash (no oracle on
// the user's files), never blocks on the FIFO, writes only inside the
// directory, and names what it skipped, the node's own FIFO and symlink
// included.
func TestCollectFromAHostileNode(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("mkfifo"); err != nil {
		t.Skip("no mkfifo")
	}
	base := t.TempDir()
	local := filepath.Join(base, "r", "node")
	outside := t.TempDir()
	os.MkdirAll(local, 0o755)
	os.WriteFile(filepath.Join(base, "secret.txt"), []byte("secret"), 0o600)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600)
	os.Symlink(outside, filepath.Join(local, "out"))
	os.Symlink(outside, filepath.Join(local, "out2"))
	if err := exec.Command("mkfifo", filepath.Join(local, "pipe")).Run(); err != nil {
		t.Fatal(err)
	}

	// The archive the node's tar sends, whatever it is asked.
	var tgz bytes.Buffer
	zw := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(zw)
	reg := func(name, body string) {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	reg("../escape.txt", "x")
	reg(filepath.Join(base, "abs-escape.txt"), "x")
	reg("./out/secret.txt", "overwritten")
	reg("./ok.txt", "fine")
	reg("./pipe", "replaced")
	reg("./unasked.txt", "x")
	tw.WriteHeader(&tar.Header{Name: "./link2", Linkname: outside, Typeflag: tar.TypeSymlink})
	tw.WriteHeader(&tar.Header{Name: "./fifo2", Typeflag: tar.TypeFifo})
	tw.Close()
	zw.Close()

	hostile := t.TempDir()
	list := strings.Join([]string{
		sha("secret") + "  ../../secret.txt",
		sha("other") + "  ./.././../secret.txt",
		sha("secret") + "  " + filepath.Join(base, "secret.txt"),
		sha("secret") + "  ./out/secret.txt",
		sha("other") + "  ./out2/secret.txt",
		sha("fine") + "  ./ok.txt",
		sha("replaced") + "  ./pipe",
	}, "\n")
	os.WriteFile(filepath.Join(hostile, "sha256sum"), []byte("#!/bin/sh\ncat <<'EOF'\n"+list+"\nEOF\n"), 0o755)
	os.WriteFile(filepath.Join(hostile, "tar"), []byte("#!/bin/sh\necho \"$@\" >> \"$HOME/tar-args\"\ncat \"$HOME/evil.tgz\"\n"), 0o755)
	mgr, targets, _ := simFleet(t, 1, func(int, string) []string {
		return []string{"PATH=" + hostile + ":" + os.Getenv("PATH")}
	})
	node := mgr.Dir(1)
	os.WriteFile(filepath.Join(node, "evil.tgz"), tgz.Bytes(), 0o644)
	p := NewPool(Options{})
	defer p.Close()
	c, err := p.Connect(t.Context(), targets[0])
	if err != nil {
		t.Fatal(err)
	}
	if code, err := c.Run(t.Context(), "mkdir -p results && echo x > results/real.txt && mkfifo results/node-fifo && ln -s /etc/passwd results/link", nil, nil, nil); err != nil || code != 0 {
		t.Fatalf("setup: %d %v", code, err)
	}

	res, err := collectGuard(t, t.Context(), p, "results", []CollectNode{{Target: targets[0], Dir: local}})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	args, _ := os.ReadFile(filepath.Join(node, "tar-args"))
	if strings.Contains(string(args), "..") || strings.Contains(string(args), base) {
		t.Errorf("collect asked the node for names outside the results directory: %s", args)
	}
	if strings.Contains(string(args), "out/secret") != strings.Contains(string(args), "out2/secret") {
		t.Errorf("what collect asks depends on a local file's hash (an oracle): %s", args)
	}
	for p, want := range map[string]string{
		filepath.Join(outside, "secret.txt"): "secret",
		filepath.Join(local, "ok.txt"):       "fine",
		filepath.Join(local, "pipe"):         "replaced",
	} {
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v %v, want a regular file", p, fi, err) // reading a FIFO would block
		} else if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	for _, p := range []string{filepath.Join(base, "r", "escape.txt"), filepath.Join(base, "abs-escape.txt"),
		filepath.Join(local, "link2"), filepath.Join(local, "fifo2"), filepath.Join(local, "unasked.txt")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("collect wrote %s", p)
		}
	}
	if r.Err != nil || r.Fetched != 2 {
		t.Errorf("result %+v, want 2 fetched (ok.txt, pipe)", r)
	}
	var names []string
	for _, s := range r.Skipped {
		names = append(names, s.String())
	}
	got := strings.Join(names, "\n")
	t.Logf("skipped:\n%s\ntar asked: %s", got, args)
	for _, want := range []string{"./node-fifo (a FIFO", "./link (a symlink", "../../secret.txt (", base + "/secret.txt (",
		"out/secret.txt (", "./link2 (a symlink", "./fifo2 (a FIFO", "../escape.txt ("} {
		if !strings.Contains(got, want) {
			t.Errorf("skipped does not name %q:\n%s", want, got)
		}
	}
}

// A node whose listing never ends is given up when ctx ends: collect
// returns ctx's error instead of waiting on it.
func TestCollectStopsWithItsContext(t *testing.T) {
	t.Parallel()
	hostile := t.TempDir()
	os.WriteFile(filepath.Join(hostile, "sha256sum"), []byte("#!/bin/sh\nmkfifo \"$HOME/never\"; cat \"$HOME/never\"\n"), 0o755)
	_, targets, _ := simFleet(t, 1, func(int, string) []string {
		return []string{"PATH=" + hostile + ":" + os.Getenv("PATH")}
	})
	p := NewPool(Options{})
	defer p.Close()
	c, err := p.Connect(t.Context(), targets[0])
	if err != nil {
		t.Fatal(err)
	}
	c.Run(t.Context(), "mkdir -p results && echo x > results/x", nil, nil, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := collectGuard(t, ctx, p, "results", []CollectNode{{Target: targets[0], Dir: t.TempDir()}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("collect with a hung node: %v, want %v", err, context.DeadlineExceeded)
	}
}
