package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResultsRoundTripAndRefusals: a results directory packs and unpacks
// file for file with its modes, links are left out, and a download that
// names a file outside its directory, a link or a device is refused.
func TestResultsRoundTripAndRefusals(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "node-0"), 0o755)
	os.WriteFile(filepath.Join(src, "items.jsonl"), []byte("{}\n"), 0o644)
	os.WriteFile(filepath.Join(src, "node-0", "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(src, "node-0", "leak"))
	var b bytes.Buffer
	if err := PackDir(&b, src); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "job")
	n, err := UnpackDir(bytes.NewReader(b.Bytes()), dst)
	if err != nil || n != 2 {
		t.Fatalf("unpacked %d files: %v", n, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "node-0", "run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh: %v %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "node-0", "leak")); err == nil {
		t.Error("a link was sent")
	}
	if _, err := UnpackDir(bytes.NewReader(b.Bytes()), dst); err == nil || !strings.Contains(err.Error(), "never overwrites") {
		t.Errorf("unpacking over a directory: %v", err)
	}
	for _, h := range []tar.Header{
		{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "/abs", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
		{Name: "a/../../b", Typeflag: tar.TypeReg, Mode: 0o644},
	} {
		var bad bytes.Buffer
		gz := gzip.NewWriter(&bad)
		tw := tar.NewWriter(gz)
		tw.WriteHeader(&h)
		tw.Close()
		gz.Close()
		out := filepath.Join(t.TempDir(), "job")
		if _, err := UnpackDir(&bad, out); err == nil || !strings.Contains(err.Error(), "not a file a download may hold") {
			t.Errorf("%s: %v", h.Name, err)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(out), "escape")); err == nil {
			t.Errorf("%s: a file was written outside the download", h.Name)
		}
	}
}
