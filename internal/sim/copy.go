package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/sim/host"
)

// `vastai copy` (vast.py copy()): with one side on the user's machine it
// asks PUT /commands/rsync/ for the other side's daemon address
// (dst_addr/dst_port or src_addr/src_port), then runs rsync in daemon
// mode over ssh as vastai_kaalia with the instance id as the module; the
// simulated machine's SSH server runs that daemon (host/rsyncd.go), on
// the instance's own SSH port and with its keys. Between two instances,
// PUT /commands/copy_direct/ copies on the server: here at once, between
// the machines' directories, so `cancel copy` never finds one running.

// copyEnd is one side of a copy: an instance, or the user's machine.
type copyEnd struct {
	id    int64
	local bool
	path  string
}

// parseCopyID reads src_id/dst_id as the CLI sends them: null or "local"
// for the user's machine, else the id as a number or a string, "C."
// prefixed when the user wrote it so (parse_vast_url keeps it).
func parseCopyID(raw json.RawMessage) (int64, bool, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return 0, true, nil
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		s = str
	}
	if s == "local" {
		return 0, true, nil
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(s, "C."), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%q is not an instance id", s)
	}
	return id, false, nil
}

func parseCopy(body []byte) (src, dst copyEnd, err error) {
	var req struct {
		SrcID   json.RawMessage `json:"src_id"`
		DstID   json.RawMessage `json:"dst_id"`
		SrcPath string          `json:"src_path"`
		DstPath string          `json:"dst_path"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return src, dst, fmt.Errorf("invalid body: %v", err)
	}
	if src.id, src.local, err = parseCopyID(req.SrcID); err != nil {
		return src, dst, fmt.Errorf("src_id: %v", err)
	}
	if dst.id, dst.local, err = parseCopyID(req.DstID); err != nil {
		return src, dst, fmt.Errorf("dst_id: %v", err)
	}
	src.path, dst.path = req.SrcPath, req.DstPath
	if src.local && dst.local {
		return src, dst, errors.New("src_id or dst_id must name an instance")
	}
	return src, dst, nil
}

// copyInstance is the live instance of the account a copy names.
func (m *Market) copyInstance(id int64) (*instance, error) {
	in := m.find(id)
	if in == nil || in.Destroyed {
		return nil, noInstance(id)
	}
	return in, nil
}

// hCopy serves both routes: the CLI sends "local:" forms to copy_direct.
func (m *Market) hCopy(r *http.Request, body []byte, now time.Time) reply {
	src, dst, err := parseCopy(body)
	if err != nil {
		return badArgs("%v", err)
	}
	if m.hosts == nil {
		return jsonReply(200, map[string]any{"success": false, "msg": "This simulator runs without machines: there is nothing to copy."})
	}
	if src.local || dst.local {
		remote, side := dst, "dst"
		if dst.local {
			remote, side = src, "src"
		}
		in, err := m.copyInstance(remote.id)
		if err != nil {
			return errReply(err)
		}
		if in.Status != "running" || !m.keysOpen[in.ID] {
			// The daemon is reached through the machine's SSH server.
			return jsonReply(200, map[string]any{"success": false, "msg": fmt.Sprintf("Instance %d is %s: copy needs it running.", in.ID, in.Status)})
		}
		port := in.SSHPort + proxyShift(in.Runtype)
		if in.DirectPort > 0 {
			port = in.DirectPort
		}
		return jsonReply(200, map[string]any{"success": true, side + "_addr": loopbackIP, side + "_port": port, "user": host.CopyUser})
	}
	for _, e := range []copyEnd{src, dst} {
		if _, err := m.copyInstance(e.id); err != nil {
			return errReply(err)
		}
	}
	n, err := copyTree(m.hosts.Dir(src.id), src.path, m.hosts.Dir(dst.id), dst.path)
	if err != nil {
		return jsonReply(200, map[string]any{"success": false, "msg": err.Error()})
	}
	return jsonReply(200, map[string]any{"success": true, "msg": fmt.Sprintf("Copied %d files from instance %d to instance %d.", n, src.id, dst.id)})
}

// hCancelCopy: copies between instances finish within their request, so
// there is never one to cancel; the instance must still be the account's.
func (m *Market) hCancelCopy(r *http.Request, body []byte, now time.Time) reply {
	var req struct {
		DstID json.RawMessage `json:"dst_id"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badArgs("invalid body: %v", err)
	}
	id, local, err := parseCopyID(req.DstID)
	if err != nil || local {
		return badArgs("dst_id must name an instance")
	}
	if _, err := m.copyInstance(id); err != nil {
		return errReply(err)
	}
	return jsonReply(200, map[string]any{"success": true, "msg": "No copy to instance " + strconv.FormatInt(id, 10) + " is in progress."})
}

// instancePath maps a path as the user writes it to one relative to the
// instance directory, as execute does: /root and /workspace are that
// directory, relative paths start there, and nothing leads out.
func instancePath(p string) (string, error) {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("path %q leaves the instance", p)
		}
	}
	rel := p
	if strings.HasPrefix(p, "/") {
		ok := false
		for _, root := range []string{"/root", "/workspace"} {
			if p == root || strings.HasPrefix(p, root+"/") {
				rel, ok = strings.TrimPrefix(p, root), true
			}
		}
		if !ok {
			return "", fmt.Errorf("path %q is outside the instance's /root and /workspace", p)
		}
	}
	rel = path.Clean("/" + rel)[1:]
	if rel == "" {
		rel = "."
	}
	return rel, nil
}

// copyTree copies as `rsync -a SRC DST` between two instance directories:
// a directory named with a trailing slash gives its contents, without one
// the directory itself; a file lands in DST when DST is a directory (or
// ends in a slash), else as DST. Both sides are opened as os.Root, so no
// symlink within either leads the copy out. It returns the files copied.
func copyTree(srcDir, srcPath, dstDir, dstPath string) (int, error) {
	srel, err := instancePath(srcPath)
	if err != nil {
		return 0, fmt.Errorf("src_path: %v", err)
	}
	drel, err := instancePath(dstPath)
	if err != nil {
		return 0, fmt.Errorf("dst_path: %v", err)
	}
	sr, err := os.OpenRoot(srcDir)
	if err != nil {
		return 0, fmt.Errorf("source instance has no machine directory yet")
	}
	defer sr.Close()
	dr, err := os.OpenRoot(dstDir)
	if err != nil {
		return 0, fmt.Errorf("destination instance has no machine directory yet")
	}
	defer dr.Close()
	info, err := sr.Lstat(srel)
	if err != nil {
		return 0, fmt.Errorf("src_path %q: %v", srcPath, errors.Unwrap(err))
	}
	dstIsDir := strings.HasSuffix(dstPath, "/") || drel == "."
	if di, err := dr.Stat(drel); err == nil && di.IsDir() {
		dstIsDir = true
	}
	target := drel
	contents := info.IsDir() && (strings.HasSuffix(srcPath, "/") || srel == ".")
	if !contents && dstIsDir {
		target = path.Join(drel, path.Base(srel))
	}
	n := 0
	err = fs.WalkDir(sr.FS(), srel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		to := path.Join(target, strings.TrimPrefix(strings.TrimPrefix(p, srel), "/"))
		if srel == "." {
			to = path.Join(target, p)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := dr.MkdirAll(to, fi.Mode().Perm()|0o700); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := sr.Readlink(p)
			if err != nil {
				return err
			}
			dr.Remove(to)
			if err := dr.Symlink(link, to); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := dr.MkdirAll(path.Dir(to), 0o700); err != nil {
				return err
			}
			if err := copyFile(sr, p, dr, to, fi.Mode().Perm()); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

func copyFile(sr *os.Root, from string, dr *os.Root, to string, mode fs.FileMode) error {
	in, err := sr.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := dr.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
