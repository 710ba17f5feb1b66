package sim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// MaxCommand is execute's command limit (vast-api.md §2, run-phase.md §1.6).
const MaxCommand = 512

// executeTimeout bounds one ls, rm or du in an instance directory.
const executeTimeout = 30 * time.Second

// hExecute is PUT /api/v0/instances/command/{id}/: ls, rm or du in the
// instance's directory, on a running or stopped instance, its output at a
// result_url the client polls (as vast's S3 link). The command runs after
// the answer, outside the market's lock: the market never waits on it.
func (m *Market) hExecute(r *http.Request, body []byte, now time.Time) reply {
	id, _ := pathID(r)
	in := m.find(id)
	if in == nil {
		return errReply(&apiError{404, "invalid_container_id", fmt.Sprintf("Instance %d not found.", id)})
	}
	var req struct {
		Command string `json:"command"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badArgs("invalid body: %v", err)
	}
	if len(req.Command) > MaxCommand {
		return badArgs("command is %d characters; at most %d are allowed", len(req.Command), MaxCommand)
	}
	if m.hosts == nil {
		return badArgs("this simulator runs without instance hosts (start it with a host directory)")
	}
	dir := m.hosts.Dir(id)
	argv, err := sandboxArgs(req.Command, dir)
	if err != nil {
		return badArgs("%v", err)
	}
	tok := resultToken()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), executeTimeout)
		defer cancel()
		os.MkdirAll(dir, 0o700)
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		text := strings.ReplaceAll(string(out), dir, "/root")
		if err != nil && len(out) == 0 {
			text = err.Error() + "\n"
		}
		m.mu.Lock()
		m.storeResult(tok, text)
		m.mu.Unlock()
	}()
	return jsonReply(200, map[string]any{
		"success": true, "result_url": "http://" + r.Host + "/sim/logs/" + tok,
		"writeable_path": dir, "msg": "command queued",
	})
}

// sandboxArgs splits an execute command into ls, rm or du and arguments
// that stay inside the instance: /root and /workspace map to its
// directory; other absolute paths and ".." are refused, since the machine
// has no filesystem of its own to protect the rest.
func sandboxArgs(command, dir string) ([]string, error) {
	f := strings.Fields(command)
	if len(f) == 0 {
		return nil, errors.New("command is empty; execute runs ls, rm or du")
	}
	switch f[0] {
	case "ls", "rm", "du":
	default:
		return nil, fmt.Errorf("%q is not allowed: execute runs only ls, rm and du", f[0])
	}
	for i, a := range f[1:] {
		if strings.ContainsAny(a, "`$;|&<>\\") {
			return nil, fmt.Errorf("argument %q: shell syntax is not allowed", a)
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		for _, part := range strings.Split(a, "/") {
			if part == ".." {
				return nil, fmt.Errorf("argument %q leaves the instance", a)
			}
		}
		if strings.HasPrefix(a, "/") {
			rel, ok := "", false
			for _, root := range []string{"/root", "/workspace"} {
				if a == root || strings.HasPrefix(a, root+"/") {
					rel, ok = strings.TrimPrefix(a, root), true
				}
			}
			if !ok {
				return nil, fmt.Errorf("path %q is outside the instance's /root and /workspace", a)
			}
			f[i+1] = filepath.Join(dir, rel)
		}
	}
	return f, nil
}

// resultToken names an execute result at /sim/logs/; it decides nothing,
// so it need not come from the seed.
func resultToken() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// storeResult keeps a result for polling, the oldest dropped past MaxLogs.
func (m *Market) storeResult(tok, text string) {
	m.st.Logs[tok] = text
	m.st.LogOrder = append(m.st.LogOrder, tok)
	for len(m.st.LogOrder) > m.cfg.MaxLogs {
		delete(m.st.Logs, m.st.LogOrder[0])
		m.st.LogOrder = m.st.LogOrder[1:]
	}
}
