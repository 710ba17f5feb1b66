package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// Account SSH keys (POST/GET/PUT/DELETE /api/v0/ssh/) and per-instance keys
// (POST/GET/DELETE /api/v0/instances/{id}/ssh/), as vast-cli's keys.py
// sends them (run-phase.md §1.5). An instance accepts the account's keys
// as they were when it was created, plus the keys attached to it since:
// vast's docs disagree on whether a new account key reaches existing
// instances, and the safe reading is that it does not.

// parseSSHKey checks a public key the way the CLI and server do: OpenSSH
// format, never a private key. It returns the key normalized to one line.
func parseSSHKey(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "PRIVATE KEY") {
		return "", fmt.Errorf("that is a private key: give the public one (the .pub file)")
	}
	if !strings.HasPrefix(strings.ToLower(s), "ssh") && !strings.HasPrefix(s, "ecdsa-") {
		return "", fmt.Errorf("not an SSH public key: it should start with ssh-ed25519, ssh-rsa or ecdsa-")
	}
	if _, _, _, _, err := gossh.ParseAuthorizedKey([]byte(s)); err != nil {
		return "", fmt.Errorf("unreadable SSH public key: %v", err)
	}
	return s, nil
}

func (m *Market) newKey(text string, now time.Time) sshKey {
	if m.st.NextKeyID == 0 {
		m.st.NextKeyID = 1000 + int64(draw(m.st.Seed, drawKey, -1, 0)*9000)
	}
	k := sshKey{ID: m.st.NextKeyID, Key: text, CreatedAt: now}
	m.st.NextKeyID++
	return k
}

func keyBody(body []byte) (string, reply, bool) {
	var req struct {
		SSHKey string `json:"ssh_key"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "", badArgs("invalid body: %v", err), false
	}
	k, err := parseSSHKey(req.SSHKey)
	if err != nil {
		return "", badArgs("ssh_key: %v", err), false
	}
	return k, reply{}, true
}

func (m *Market) hCreateKey(r *http.Request, body []byte, now time.Time) reply {
	text, rep, ok := keyBody(body)
	if !ok {
		return rep
	}
	for _, k := range m.st.SSHKeys {
		if k.Key == text {
			return jsonReply(200, map[string]any{"success": true, "key": k})
		}
	}
	k := m.newKey(text, now)
	m.st.SSHKeys = append(m.st.SSHKeys, k)
	return jsonReply(200, map[string]any{"success": true, "key": k})
}

func (m *Market) hListKeys(r *http.Request, _ []byte, _ time.Time) reply {
	keys := m.st.SSHKeys
	if keys == nil {
		keys = []sshKey{}
	}
	return jsonReply(200, map[string]any{"success": true, "ssh_keys": keys})
}

func keyID(r *http.Request, name string) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	return id, err == nil
}

func noKey(id string) reply {
	return errReply(&apiError{404, "no_such_key", "SSH key " + id + " not found."})
}

func (m *Market) hUpdateKey(r *http.Request, body []byte, _ time.Time) reply {
	id, ok := keyID(r, "key")
	text, rep, valid := keyBody(body)
	if !valid {
		return rep
	}
	for i := range m.st.SSHKeys {
		if ok && m.st.SSHKeys[i].ID == id {
			m.st.SSHKeys[i].Key = text
			return jsonReply(200, map[string]any{"success": true, "key": m.st.SSHKeys[i]})
		}
	}
	return noKey(r.PathValue("key"))
}

func (m *Market) hDeleteKey(r *http.Request, _ []byte, _ time.Time) reply {
	id, ok := keyID(r, "key")
	for i := range m.st.SSHKeys {
		if ok && m.st.SSHKeys[i].ID == id {
			m.st.SSHKeys = append(m.st.SSHKeys[:i:i], m.st.SSHKeys[i+1:]...)
			return okReply()
		}
	}
	return noKey(r.PathValue("key"))
}

func (m *Market) hAttachKey(r *http.Request, body []byte, now time.Time) reply {
	id, _ := pathID(r)
	in := m.find(id)
	if in == nil {
		return errReply(noInstance(id))
	}
	text, rep, ok := keyBody(body)
	if !ok {
		return rep
	}
	for _, k := range in.Keys {
		if k.Key == text {
			return jsonReply(200, map[string]any{"success": true, "msg": "The key is already attached.", "key": k})
		}
	}
	k := m.newKey(text, now)
	in.Keys = append(in.Keys, k)
	m.keysChanged(in)
	return jsonReply(200, map[string]any{"success": true, "msg": fmt.Sprintf("SSH key attached to instance %d.", id), "key": k})
}

func (m *Market) hInstanceKeys(r *http.Request, _ []byte, _ time.Time) reply {
	id, _ := pathID(r)
	in := m.find(id)
	if in == nil {
		return errReply(noInstance(id))
	}
	keys := in.Keys
	if keys == nil {
		keys = []sshKey{}
	}
	// vast answers ssh_keys as a JSON string holding the list.
	b, _ := json.Marshal(keys)
	return jsonReply(200, map[string]any{"success": true, "ssh_keys": string(b)})
}

func (m *Market) hDetachKey(r *http.Request, _ []byte, _ time.Time) reply {
	id, _ := pathID(r)
	in := m.find(id)
	if in == nil {
		return errReply(noInstance(id))
	}
	kid, ok := keyID(r, "key")
	for i, k := range in.Keys {
		if ok && k.ID == kid {
			in.Keys = append(in.Keys[:i:i], in.Keys[i+1:]...)
			m.keysChanged(in)
			return okReply()
		}
	}
	return noKey(r.PathValue("key"))
}

// keysChanged tells a running machine which keys it accepts now.
func (m *Market) keysChanged(in *instance) {
	if m.hosts != nil && m.keysOpen[in.ID] {
		m.hosts.SetKeys(in.ID, in.keyLines())
	}
}

// instanceScope reports whether an instance's own key (CONTAINER_API_KEY)
// may make this request: read, start, stop and destroy that instance,
// nothing else.
func instanceScope(r *http.Request, owner int64) bool {
	switch r.Pattern {
	case "GET /api/v0/instances/{id}/{$}", "DELETE /api/v0/instances/{id}/{$}", "PUT /api/v0/instances/{id}/{$}":
	default:
		return false
	}
	id, ok := pathID(r)
	return ok && id == owner
}

// stateOnly reports whether a PUT /instances/{id}/ body only sets state
// (a start or stop), which is all an instance key may change.
func stateOnly(body []byte) bool {
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	for k := range req {
		if k != "state" {
			return false
		}
	}
	return true
}
