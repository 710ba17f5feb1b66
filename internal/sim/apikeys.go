package sim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"
)

// The account's extra API keys (vastai create/show/delete api-key, GET and
// POST /api/v0/auth/apikeys/, GET and DELETE /api/v0/auth/apikeys/{id}/).
// A created key is a real key of the account: every route accepts it
// within its permissions, {"api": {CATEGORY: {...}, ...}} with vast's
// categories (docs.vast.ai/api-reference/permissions); no permissions
// means full access, as vast's default. Left out: the per-category
// constraints inside {...} and key_params (kept and shown, not enforced).
// The key's value is shown once, when it is created, as vast does; the
// account's main key is never listed.

// apiCategories are vast's permission categories.
var apiCategories = []string{"instance_read", "instance_write", "user_read", "user_write", "billing_read",
	"billing_write", "machine_read", "machine_write", "misc", "team_read", "team_write"}

// routeCategory is the permission each route needs; a route not listed
// needs a key with full access.
var routeCategory = map[string]string{
	"GET /api/v1/instances/{$}":                      "instance_read",
	"GET /api/v0/instances/{id}/{$}":                 "instance_read",
	"PUT /api/v0/instances/request_logs/{id}/{$}":    "instance_read",
	"GET /api/v0/instances/{id}/ssh/{$}":             "instance_read",
	"PUT /api/v0/asks/{id}/{$}":                      "instance_write",
	"POST /api/v0/asks/bulk/{$}":                     "instance_write",
	"PUT /api/v0/instances/{id}/{$}":                 "instance_write",
	"PUT /api/v0/instances/{$}":                      "instance_write",
	"PUT /api/v0/instances/reboot/{id}/{$}":          "instance_write",
	"PUT /api/v0/instances/recycle/{id}/{$}":         "instance_write",
	"PUT /api/v0/instances/update_template/{id}/{$}": "instance_write",
	"PUT /api/v0/launch_instance/{$}":                "instance_write",
	"PUT /api/v0/instances/bid_price/{id}/{$}":       "instance_write",
	"DELETE /api/v0/instances/{id}/{$}":              "instance_write",
	"DELETE /api/v0/instances/{$}":                   "instance_write",
	"PUT /api/v0/instances/command/{id}/{$}":         "instance_write",
	"POST /api/v0/instances/{id}/ssh/{$}":            "instance_write",
	"DELETE /api/v0/instances/{id}/ssh/{key}/{$}":    "instance_write",
	"PUT /api/v0/commands/rsync/{$}":                 "instance_write",
	"PUT /api/v0/commands/copy_direct/{$}":           "instance_write",
	"DELETE /api/v0/commands/copy_direct/{$}":        "instance_write",
	"GET /api/v0/users/current":                      "user_read",
	"GET /api/v0/ssh/{$}":                            "user_read",
	"GET /api/v0/template/{$}":                       "user_read",
	"GET /api/v0/auth/apikeys/{$}":                   "user_read",
	"GET /api/v0/auth/apikeys/{id}/{$}":              "user_read",
	"POST /api/v0/ssh/{$}":                           "user_write",
	"PUT /api/v0/ssh/{key}/{$}":                      "user_write",
	"DELETE /api/v0/ssh/{key}/{$}":                   "user_write",
	"POST /api/v0/auth/apikeys/{$}":                  "user_write",
	"DELETE /api/v0/auth/apikeys/{id}/{$}":           "user_write",
	"GET /api/v0/charges/{$}":                        "billing_read",
	"GET /api/v1/invoices/{$}":                       "billing_read",
	"GET /api/v0/invoices":                           "billing_read",
	"GET /api/v0/users/me/invoices":                  "billing_read",
	"GET /api/v0/users/me/invoices/{$}":              "billing_read",
	"POST /api/v0/bundles/{$}":                       "misc",
	"PUT /api/v0/search/asks/{$}":                    "misc",
}

type apiKey struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Key  string `json:"key"`
	// Categories nil: full access.
	Categories  []string        `json:"categories"`
	Permissions json.RawMessage `json:"permissions"`
	KeyParams   json.RawMessage `json:"key_params"`
	CreatedAt   time.Time       `json:"created_at"`
}

func (k *apiKey) allows(category string) bool {
	return k.Categories == nil || (category != "" && slices.Contains(k.Categories, category))
}

func (k *apiKey) authorize(r *http.Request) (reply, bool) {
	cat := routeCategory[r.Pattern]
	if k.allows(cat) {
		return reply{}, true
	}
	need := cat
	if need == "" {
		need = "full access"
	}
	return jsonReply(http.StatusForbidden, map[string]any{"success": false, "error": "forbidden",
		"msg": fmt.Sprintf("API key %d (%s) lacks the permission this call needs: %s.", k.ID, k.Name, need)}), false
}

// apiKey finds a created key by its value; m.mu is held.
func (m *Market) apiKey(value string) *apiKey {
	if value == "" {
		return nil
	}
	for i := range m.st.APIKeys {
		if m.st.APIKeys[i].Key == value {
			return &m.st.APIKeys[i]
		}
	}
	return nil
}

// view is a key as listings show it: never its value.
func (k *apiKey) view() map[string]any {
	return map[string]any{"id": k.ID, "name": k.Name, "permissions": k.Permissions, "key_params": k.KeyParams,
		"created_at": float64(k.CreatedAt.Unix())}
}

// parsePermissions reads {"api": {category: {...}}}; empty means full
// access (nil categories).
func parsePermissions(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" || string(raw) == "{}" {
		return nil, nil
	}
	var p struct {
		API map[string]json.RawMessage `json:"api"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.API == nil {
		return nil, fmt.Errorf(`permissions must be {"api": {CATEGORY: {}, ...}}`)
	}
	cats := []string{}
	for c := range p.API {
		if !slices.Contains(apiCategories, c) {
			return nil, fmt.Errorf("unknown permission category %q (known: %v)", c, apiCategories)
		}
		cats = append(cats, c)
	}
	sort.Strings(cats)
	return cats, nil
}

func (m *Market) hCreateAPIKey(r *http.Request, body []byte, now time.Time) reply {
	var req struct {
		Name        string          `json:"name"`
		Permissions json.RawMessage `json:"permissions"`
		KeyParams   json.RawMessage `json:"key_params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badArgs("invalid body: %v", err)
	}
	cats, err := parsePermissions(req.Permissions)
	if err != nil {
		return badArgs("%v", err)
	}
	// A scoped key cannot make a key that may do more than it may.
	if by := m.apiKey(requestKey(r)); by != nil && by.Categories != nil {
		for _, c := range cats {
			if !by.allows(c) {
				return errReply(&apiError{http.StatusForbidden, "forbidden", fmt.Sprintf("this key lacks %s, so it cannot grant it", c)})
			}
		}
		if cats == nil {
			return errReply(&apiError{http.StatusForbidden, "forbidden", "a scoped key cannot create a key with full access"})
		}
	}
	var b [24]byte
	rand.Read(b[:])
	if m.st.NextAPIKeyID == 0 {
		m.st.NextAPIKeyID = 100000 + int64(draw(m.st.Seed, drawKey, -2, 0)*900000)
	}
	k := apiKey{ID: m.st.NextAPIKeyID, Name: req.Name, Key: hex.EncodeToString(b[:]), Categories: cats,
		Permissions: req.Permissions, KeyParams: req.KeyParams, CreatedAt: now}
	if len(k.Permissions) == 0 {
		k.Permissions = json.RawMessage("null")
	}
	if len(k.KeyParams) == 0 {
		k.KeyParams = json.RawMessage("null")
	}
	m.st.NextAPIKeyID++
	m.st.APIKeys = append(m.st.APIKeys, k)
	out := k.view()
	out["success"], out["key"] = true, k.Key
	return jsonReply(200, out)
}

func (m *Market) hListAPIKeys(r *http.Request, _ []byte, _ time.Time) reply {
	keys := []map[string]any{}
	for i := range m.st.APIKeys {
		keys = append(keys, m.st.APIKeys[i].view())
	}
	return jsonReply(200, map[string]any{"success": true, "apikeys": keys})
}

func (m *Market) findAPIKey(r *http.Request) (int, reply, bool) {
	id, ok := pathID(r)
	if ok {
		for i := range m.st.APIKeys {
			if m.st.APIKeys[i].ID == id {
				return i, reply{}, true
			}
		}
	}
	return 0, errReply(&apiError{http.StatusNotFound, "no_such_key", fmt.Sprintf("API key %s not found.", r.PathValue("id"))}), false
}

func (m *Market) hShowAPIKey(r *http.Request, _ []byte, _ time.Time) reply {
	i, rep, ok := m.findAPIKey(r)
	if !ok {
		return rep
	}
	return jsonReply(200, map[string]any{"success": true, "apikey": m.st.APIKeys[i].view()})
}

func (m *Market) hDeleteAPIKey(r *http.Request, _ []byte, _ time.Time) reply {
	i, rep, ok := m.findAPIKey(r)
	if !ok {
		return rep
	}
	m.st.APIKeys = slices.Delete(m.st.APIKeys, i, i+1)
	return okReply()
}
