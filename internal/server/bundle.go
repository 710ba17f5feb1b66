package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/vastfleet/vastfleet/internal/ignore"
	"github.com/vastfleet/vastfleet/internal/itemspec"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// A submitted job travels as a bundle: a gzip'd tar holding the task file
// (TaskName) with its workdir and items file rewritten to point inside the
// bundle, the workdir's files under WorkdirName/ and the items file as
// ItemsName. The server unpacks it into a directory of its own and runs up
// on it there: the client's paths mean nothing on the server.
const (
	TaskName    = "task.yaml"
	WorkdirName = "workdir"
	ItemsName   = "items.txt"
)

// MaxBundle bounds a bundle, packed and unpacked.
const MaxBundle = 1 << 30

// BundleSpec is what goes into a bundle.
type BundleSpec struct {
	// Task is the task file as written.
	Task []byte
	// Workdir is the workdir's absolute path ("" for none) and Files its
	// files to send (slash-separated, relative to it).
	Workdir string
	Files   []string
	// Items is the items file's absolute path when items: names a file.
	Items string
}

// Pack writes the bundle.
func Pack(w io.Writer, s BundleSpec) error {
	task, err := rewriteTask(s.Task, s.Workdir != "", s.Items != "")
	if err != nil {
		return err
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	add := func(name string, mode int64, r io.Reader, size int64) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: size, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	if err := add(TaskName, 0o600, bytes.NewReader(task), int64(len(task))); err != nil {
		return err
	}
	for _, rel := range s.Files {
		if err := tarFile(tw, WorkdirName+"/"+rel, filepath.Join(s.Workdir, filepath.FromSlash(rel))); err != nil {
			return err
		}
	}
	if s.Items != "" {
		if err := tarFile(tw, ItemsName, s.Items); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// tarFile adds the file at p to tw as name, with its mode bits, size as
// read when opened, and its modification time.
func tarFile(tw *tar.Writer, name, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, fi.Size())
	return err
}

// rewriteTask points the task file's workdir and items file inside the
// bundle; the rest is kept as written.
func rewriteTask(task []byte, workdir, items bool) ([]byte, error) {
	var doc yaml.MapSlice
	if err := yaml.Unmarshal(task, &doc); err != nil {
		return nil, fmt.Errorf("task file: %w", err)
	}
	for i, kv := range doc {
		switch kv.Key {
		case "workdir":
			if workdir {
				doc[i].Value = WorkdirName
			}
		case "items":
			if items {
				doc[i].Value = "@" + ItemsName
			}
		}
	}
	return yaml.Marshal(doc)
}

// Unpack extracts a bundle into dir (which must be empty or new). Only
// regular files under dir are written: a name that climbs out of it, a
// link or a device is refused.
func Unpack(r io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	gz, err := gzip.NewReader(io.LimitReader(r, MaxBundle))
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	tr := tar.NewReader(gz)
	var total int64
	sawTask := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		name := path.Clean(h.Name)
		if h.Typeflag != tar.TypeReg || name != h.Name || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") ||
			(name != TaskName && name != ItemsName && !strings.HasPrefix(name, WorkdirName+"/")) {
			return fmt.Errorf("bundle: %q is not a file the bundle may hold", h.Name)
		}
		if total += h.Size; total > MaxBundle {
			return fmt.Errorf("bundle: more than %d bytes", MaxBundle)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, os.FileMode(h.Mode&0o755)|0o600)
		if err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		sawTask = sawTask || name == TaskName
	}
	if !sawTask {
		return fmt.Errorf("bundle: no %s", TaskName)
	}
	// A workdir with no file to send is still a directory.
	return os.MkdirAll(filepath.Join(dir, WorkdirName), 0o700)
}

// TaskBundle is what a task file sends to a server: the file as written,
// its workdir's files (as files lists them: the sync's ignore rules) and
// its items file; name is the task's name, the job's prefix.
func TaskBundle(path string, files func(dir string) ([]string, error)) (name string, spec BundleSpec, err error) {
	jf, err := jobfile.Load(path)
	if err != nil {
		return "", spec, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", spec, err
	}
	spec = BundleSpec{Task: raw, Workdir: jf.Workdir}
	if jf.Workdir != "" {
		if spec.Files, err = files(jf.Workdir); err != nil {
			return "", spec, fmt.Errorf("workdir %s: %w", jf.Workdir, err)
		}
	}
	if p, ok := itemspec.FilePath(jf.Items); ok {
		spec.Items = p
	}
	return jf.Name, spec, nil
}

// PackTask packs what the task file at path sends to a server
// (TaskBundle), its workdir's files as a sync with rules would send them;
// it returns the task's name and how many workdir files it holds. A task
// file that cannot be read or bundled is the user's error.
func PackTask(w io.Writer, path string, rules []ignore.Rule) (name string, nfiles int, err error) {
	name, spec, err := TaskBundle(path, func(dir string) ([]string, error) {
		files, err := remote.ScanTree(dir, rules, nil)
		rels := make([]string, len(files))
		for i, tf := range files {
			rels[i] = tf.Rel
		}
		return rels, err
	})
	if err != nil {
		return "", 0, usage.Error{Err: err}
	}
	if err := Pack(w, spec); err != nil {
		return "", 0, err
	}
	return name, len(spec.Files), nil
}
