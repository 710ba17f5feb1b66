package vast

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
)

var _ provider.KeyManager = (*Client)(nil)

// wireKey is a key as vast answers it. The field names vary between
// endpoints and over time, so each spelling seen is read.
type wireKey struct {
	ID        json.Number     `json:"id"`
	SSHKey    string          `json:"ssh_key"`
	PublicKey string          `json:"public_key"`
	Key       string          `json:"key"`
	CreatedAt json.RawMessage `json:"created_at"`
}

func (w wireKey) key() (provider.SSHKey, error) {
	id, err := strconv.ParseInt(w.ID.String(), 10, 64)
	if err != nil {
		return provider.SSHKey{}, fmt.Errorf("key id %q: %w", w.ID, err)
	}
	k := provider.SSHKey{ID: id, PublicKey: strings.TrimSpace(firstOf(w.SSHKey, w.PublicKey, w.Key))}
	var s string
	var f float64
	switch {
	case json.Unmarshal(w.CreatedAt, &s) == nil:
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			k.CreatedAt = t
		}
	case json.Unmarshal(w.CreatedAt, &f) == nil && f > 0:
		k.CreatedAt = time.Unix(0, int64(f*1e9)).UTC()
	}
	return k, nil
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// decodeKeys reads a key list that may come bare, wrapped in {"ssh_keys"},
// or as a JSON string holding the list (instance keys do that).
func decodeKeys(raw json.RawMessage) ([]provider.SSHKey, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var inner string
	if json.Unmarshal(raw, &inner) == nil {
		return decodeKeys(json.RawMessage(inner))
	}
	if raw[0] == '{' {
		var w struct {
			SSHKeys json.RawMessage `json:"ssh_keys"`
		}
		if err := json.Unmarshal(raw, &w); err != nil {
			return nil, err
		}
		return decodeKeys(w.SSHKeys)
	}
	var list []wireKey
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	out := make([]provider.SSHKey, 0, len(list))
	for _, w := range list {
		k, err := w.key()
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// checkPublicKey refuses what the CLI refuses before sending: a private
// key, or text that is not an OpenSSH public key.
func checkPublicKey(k string) (string, error) {
	k = strings.TrimSpace(k)
	if strings.Contains(k, "PRIVATE KEY") {
		return "", fmt.Errorf("that is a private SSH key: pass the public one (the .pub file)")
	}
	if !strings.HasPrefix(strings.ToLower(k), "ssh") && !strings.HasPrefix(k, "ecdsa-") {
		return "", fmt.Errorf("not an SSH public key (it should start with ssh-ed25519, ssh-rsa or ecdsa-)")
	}
	return k, nil
}

// RegisterSSHKey is POST /api/v0/ssh/ {"ssh_key"}.
func (c *Client) RegisterSSHKey(ctx context.Context, publicKey string) (provider.SSHKey, error) {
	k, err := checkPublicKey(publicKey)
	if err != nil {
		return provider.SSHKey{}, err
	}
	cl := call{method: http.MethodPost, path: "/api/v0/ssh/", body: map[string]string{"ssh_key": k}, policy: retryWrite}
	resp, err := c.do(ctx, cl)
	if err != nil {
		return provider.SSHKey{}, err
	}
	var out struct {
		Key *wireKey `json:"key"`
		wireKey
	}
	if err := c.decode(cl, opOther, resp, &out); err != nil {
		return provider.SSHKey{}, err
	}
	if err := c.checkSuccess(cl, opOther, resp); err != nil {
		return provider.SSHKey{}, err
	}
	w := out.wireKey
	if out.Key != nil {
		w = *out.Key
	}
	got, err := w.key()
	if err != nil {
		return provider.SSHKey{}, fmt.Errorf("%s %s: %w", cl.method, cl.path, err)
	}
	if got.PublicKey == "" {
		got.PublicKey = k
	}
	return got, nil
}

// ListSSHKeys is GET /api/v0/ssh/.
func (c *Client) ListSSHKeys(ctx context.Context) ([]provider.SSHKey, error) {
	cl := call{method: http.MethodGet, path: "/api/v0/ssh/", policy: retryRead}
	return c.keyList(ctx, cl, opOther)
}

// InstanceSSHKeys is GET /api/v0/instances/{id}/ssh/.
func (c *Client) InstanceSSHKeys(ctx context.Context, instanceID int64) ([]provider.SSHKey, error) {
	cl := call{method: http.MethodGet, path: fmt.Sprintf("/api/v0/instances/%d/ssh/", instanceID), policy: retryRead}
	return c.keyList(ctx, cl, opInstance)
}

func (c *Client) keyList(ctx context.Context, cl call, o op) ([]provider.SSHKey, error) {
	resp, err := c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := c.decode(cl, o, resp, nil); err != nil {
		return nil, err
	}
	if err := c.checkSuccess(cl, o, resp); err != nil {
		return nil, err
	}
	keys, err := decodeKeys(resp.body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: unexpected key list: %v", cl.method, cl.path, err)
	}
	return keys, nil
}

// DeleteSSHKey is DELETE /api/v0/ssh/{id}/.
func (c *Client) DeleteSSHKey(ctx context.Context, keyID int64) error {
	return c.simple(ctx, call{method: http.MethodDelete, path: fmt.Sprintf("/api/v0/ssh/%d/", keyID), policy: retryWrite})
}

// AttachSSHKey is POST /api/v0/instances/{id}/ssh/ {"ssh_key"}
// (`vastai attach ssh ID KEY`).
func (c *Client) AttachSSHKey(ctx context.Context, instanceID int64, publicKey string) error {
	k, err := checkPublicKey(publicKey)
	if err != nil {
		return err
	}
	return c.simple(ctx, call{method: http.MethodPost, path: fmt.Sprintf("/api/v0/instances/%d/ssh/", instanceID),
		body: map[string]string{"ssh_key": k}, policy: retryWrite})
}

// DetachSSHKey is DELETE /api/v0/instances/{id}/ssh/{key_id}/.
func (c *Client) DetachSSHKey(ctx context.Context, instanceID, keyID int64) error {
	return c.simple(ctx, call{method: http.MethodDelete, path: fmt.Sprintf("/api/v0/instances/%d/ssh/%d/", instanceID, keyID), policy: retryWrite})
}
