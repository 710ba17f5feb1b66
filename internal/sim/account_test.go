package sim

import (
	"math"
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
