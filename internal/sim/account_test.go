package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestVastCLIShowUser: `vastai show user` pops api_key from
// /users/current before printing, so the field must be there (a KeyError
// crashed the CLI); it is the key the request came with.
func TestVastCLIShowUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 24})
	var user map[string]any
	if st, _, b := h.do("GET", "/api/v0/users/current", nil, &user); st != 200 {
		t.Fatalf("users/current: %d %s", st, b)
	}
	if user["api_key"] != h.key {
		t.Errorf("api_key = %v, want the request's key", user["api_key"])
	}
}

// TestVastCLISearchInvoices sends what `vastai search invoices [QUERY]`
// sends (GET /invoices?select_cols=["*"]&select_filters=...) and reads the
// bare list it expects: the opening credit, then the ledger's charges,
// with balances that end at the account's balance.
func TestVastCLISearchInvoices(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 25})
	h.create(h.cheapOffer().ID, "billed")
	h.clock.Advance(3 * time.Hour)
	search := func(filters map[string]any, cols ...string) []map[string]any {
		t.Helper()
		if cols == nil {
			cols = []string{"*"}
		}
		var rows []map[string]any
		if st, _, b := h.do("GET", "/api/v0/invoices?"+pyQuery([][2]any{{"select_cols", cols}, {"select_filters", filters}}), nil, &rows); st != 200 {
			t.Fatalf("invoices: %d %s", st, b)
		}
		return rows
	}
	all := search(map[string]any{})
	if len(all) < 2 || all[0]["is_credit"] != true || all[0]["amount_cents"].(float64) <= 0 {
		t.Fatalf("want the opening credit then charges, got %v", all)
	}
	var ledger struct{ Balance float64 }
	h.do("GET", "/sim/ledger", nil, &ledger)
	if last := all[len(all)-1]["balance_after"].(float64); math.Abs(last-ledger.Balance) > 0.02 {
		t.Errorf("last balance_after %.2f, account balance %.2f", last, ledger.Balance)
	}
	debits := search(map[string]any{"is_credit": map[string]any{"eq": false}})
	if len(debits) != len(all)-1 {
		t.Errorf("is_credit=false kept %d of %d rows", len(debits), len(all))
	}
	if got := search(map[string]any{"id": map[string]any{"in": []string{"1"}}}, "id", "amount_cents"); len(got) != 1 || len(got[0]) != 2 {
		t.Errorf("id in [1] with two columns: %v", got)
	}
	when := all[0]["when"].(float64)
	if got := search(map[string]any{"when": map[string]any{"gt": when}}); len(got) != len(all)-1 {
		t.Errorf("when > opening kept %d of %d", len(got), len(all))
	}
	if st, _, _ := h.do("GET", "/api/v0/invoices?"+pyQuery([][2]any{{"select_filters", map[string]any{"nope": map[string]any{"eq": 1}}}}), nil, nil); st != 400 {
		t.Errorf("unknown column: %d, want 400", st)
	}
}

// TestVastCLIAPIKeys sends what `vastai create api-key --name N
// --permission_file F`, `show api-keys`, `show api-key ID` and `delete
// api-key ID` send, and uses the created key: it works as a key of the
// account within its permission categories, is shown only when created,
// and stops working once deleted. The main key is never listed.
func TestVastCLIAPIKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 26})
	var made struct {
		Success bool   `json:"success"`
		ID      int64  `json:"id"`
		Key     string `json:"key"`
	}
	perms := map[string]any{"api": map[string]any{"instance_read": map[string]any{}, "user_read": map[string]any{}}}
	if st, _, b := h.do("POST", "/api/v0/auth/apikeys/", map[string]any{"name": "reader", "permissions": perms, "key_params": nil}, &made); st != 200 || !made.Success || made.Key == "" || made.ID == 0 {
		t.Fatalf("create api-key: %d %s", st, b)
	}
	st, _, list := h.do("GET", "/api/v0/auth/apikeys/", nil, nil)
	if st != 200 || !strings.Contains(string(list), `"reader"`) {
		t.Fatalf("show api-keys: %d %s", st, list)
	}
	if strings.Contains(string(list), made.Key) || strings.Contains(string(list), h.key) {
		t.Errorf("a listing shows a key's value: %s", list)
	}
	var one struct {
		APIKey map[string]any `json:"apikey"`
	}
	if st, _, b := h.do("GET", fmt.Sprintf("/api/v0/auth/apikeys/%d/", made.ID), nil, &one); st != 200 || one.APIKey["name"] != "reader" || strings.Contains(string(b), made.Key) {
		t.Errorf("show api-key: %d %s", st, b)
	}

	reader := *h
	reader.key = made.Key
	for _, c := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"GET", "/api/v1/instances/", nil, 200},
		{"GET", "/api/v0/users/current", nil, 200},
		{"GET", "/api/v0/auth/apikeys/", nil, 200},
		{"GET", "/api/v0/charges/", nil, 403},
		{"POST", "/api/v0/bundles/", map[string]any{"limit": 1}, 403},
		{"PUT", fmt.Sprintf("/api/v0/asks/%d/", h.cheapOffer().ID), map[string]any{"image": "x", "disk": 10}, 403},
		{"POST", "/api/v0/auth/apikeys/", map[string]any{"name": "escalate"}, 403},
		{"DELETE", fmt.Sprintf("/api/v0/auth/apikeys/%d/", made.ID), nil, 403},
	} {
		if st, _, b := reader.do(c.method, c.path, c.body, nil); st != c.want {
			t.Errorf("reader key %s %s: %d %s, want %d", c.method, c.path, st, b, c.want)
		}
	}
	var user map[string]any
	reader.do("GET", "/api/v0/users/current", nil, &user)
	if user["api_key"] != made.Key {
		t.Errorf("users/current with the reader key shows api_key %v", user["api_key"])
	}

	if st, _, b := h.do("POST", "/api/v0/auth/apikeys/", map[string]any{"name": "bad", "permissions": map[string]any{"api": map[string]any{"root": map[string]any{}}}}, nil); st != 400 {
		t.Errorf("unknown category: %d %s", st, b)
	}
	if st, _, b := h.do("DELETE", fmt.Sprintf("/api/v0/auth/apikeys/%d/", made.ID), nil, nil); st != 200 {
		t.Fatalf("delete api-key: %d %s", st, b)
	}
	if st, _, _ := reader.do("GET", "/api/v1/instances/", nil, nil); st != 401 {
		t.Errorf("a deleted key still works: %d", st)
	}
	if st, _, _ := h.do("GET", fmt.Sprintf("/api/v0/auth/apikeys/%d/", made.ID), nil, nil); st != 404 {
		t.Errorf("show a deleted key: %d", st)
	}
}
