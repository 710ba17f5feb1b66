package server

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ActionResults is the audit log's name for a job's results sent to a
// client. A viewer may: it reads what the job made, as it reads its logs.
const ActionResults = "results"

// results sends a job's results directory (what its up collected,
// findings.jsonl, items.jsonl) as a gzip'd tar of its regular files.
func (s *Server) results(w http.ResponseWriter, r *http.Request, who Identity) {
	id := r.PathValue("id")
	if !s.permit(w, r, who, ActionResults, id) {
		return
	}
	if !jobName.MatchString(id) {
		s.fail(w, http.StatusBadRequest, "bad_request", fmt.Errorf("job %q: letters, digits, '.', '_' and '-'", id))
		return
	}
	dir := filepath.Join(s.cfg.ResultsDir, id)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		s.fail(w, http.StatusNotFound, "not_found", fmt.Errorf("job %s has no results on this server yet (they land when its nodes are collected: at its end, or `vastfleet down %s`)", id, id))
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.WriteHeader(http.StatusOK)
	err := PackDir(w, dir)
	outcome := "sent"
	if err != nil {
		outcome = "failed"
		s.cfg.Log.Warn("sending results", "job", id, "err", err)
	}
	s.audit(r.Context(), who, ActionResults, id, outcome)
}

// PackDir writes dir's regular files, by their slash-separated paths
// under it, as a gzip'd tar; links and devices are left out.
func PackDir(w io.Writer, dir string) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		return tarFile(tw, filepath.ToSlash(rel), p)
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// UnpackDir extracts what PackDir wrote into dir, which must not exist
// yet: a download never overwrites. Only regular files under dir are
// written; a name that climbs out, a link or a device is refused (the
// files came from strangers' machines).
func UnpackDir(r io.Reader, dir string) (files int, err error) {
	if _, err := os.Stat(dir); err == nil {
		return 0, fmt.Errorf("%s exists: give another --to, or move it away (a download never overwrites)", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return 0, fmt.Errorf("results: %w", err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return files, fmt.Errorf("results: %w", err)
		}
		name := path.Clean(h.Name)
		if h.Typeflag != tar.TypeReg || name != h.Name || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return files, fmt.Errorf("results: %q is not a file a download may hold", h.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return files, err
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, os.FileMode(h.Mode&0o755)|0o600)
		if err != nil {
			return files, fmt.Errorf("results: %w", err)
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, fmt.Errorf("results: %w", err)
		}
		files++
	}
}

// Results downloads job id's results from the server into dir (new).
func (c *Client) Results(ctx context.Context, id, dir string) (int, error) {
	if _, err := os.Stat(dir); err == nil {
		return 0, fmt.Errorf("%s exists: give another --to, or move it away (a download never overwrites)", dir)
	}
	resp, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/results", nil, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return UnpackDir(resp.Body, dir)
}
