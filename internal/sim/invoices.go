package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"time"
)

// `vastai search invoices` (GET /api/v0/invoices?select_cols=["*"]&
// select_filters={field: {op: value}}) reads vast's invoices table, whose
// columns the CLI lists (invoices_fields). The simulated account's rows
// come from its ledger: the opening credit (is_credit, service
// stripe_payments, as /api/v1/invoices shows it) and one debit per ledger
// entry (service "instance_charge", a simulator label: vast keeps usage
// elsewhere), with the balance before and after each, oldest first. The
// answer is a bare list, which the CLI hands to display_table.

var invoiceColumns = []string{"id", "user_id", "when", "paid_on", "payment_expected", "amount_cents", "is_credit",
	"is_delayed", "balance_before", "balance_after", "original_amount", "event_id", "cut_amount", "cut_percent",
	"extra", "service", "stripe_charge", "stripe_refund", "stripe_payout", "error", "paypal_email",
	"transfer_group", "failed", "refunded", "is_check"}

func (m *Market) invoiceRows() []map[string]any {
	row := func(id int64, at time.Time, cents int64, credit bool, before float64, service string, extra any) map[string]any {
		after := before - float64(cents)/100
		if credit {
			after = before + float64(cents)/100
		}
		return map[string]any{"id": id, "user_id": simUserID, "when": float64(at.Unix()), "paid_on": float64(at.Unix()),
			"payment_expected": nil, "amount_cents": cents, "is_credit": credit, "is_delayed": false,
			"balance_before": round2(before), "balance_after": round2(after), "original_amount": cents,
			"event_id": fmt.Sprintf("sim-%d", id), "cut_amount": 0, "cut_percent": 0.0, "extra": extra,
			"service": service, "stripe_charge": nil, "stripe_refund": nil, "stripe_payout": nil, "error": nil,
			"paypal_email": nil, "transfer_group": nil, "failed": false, "refunded": false, "is_check": false}
	}
	opening := m.openingCredit()
	rows := []map[string]any{row(1, m.openedAt(), int64(math.Round(opening*100)), true, 0, "stripe_payments", nil)}
	ledger := append([]LedgerEntry(nil), m.st.Ledger...)
	sort.SliceStable(ledger, func(i, j int) bool { return ledger[i].To.Before(ledger[j].To) })
	bal := opening
	for i, e := range ledger {
		r := row(int64(i+2), e.To, int64(math.Round(e.Amount*100)), false, bal, "instance_charge",
			map[string]any{"instance_id": e.InstanceID, "kind": e.Kind, "from": float64(e.From.Unix()), "to": float64(e.To.Unix())})
		bal -= e.Amount
		r["balance_after"] = round2(bal)
		rows = append(rows, r)
	}
	return rows
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

func (m *Market) hSearchInvoices(r *http.Request, _ []byte, _ time.Time) reply {
	q := r.URL.Query()
	cols := []string{"*"}
	if s := q.Get("select_cols"); s != "" {
		if err := json.Unmarshal([]byte(s), &cols); err != nil {
			return badArgs("select_cols must be a JSON list of column names")
		}
	}
	filters := map[string]map[string]any{}
	if s := q.Get("select_filters"); s != "" {
		if err := json.Unmarshal([]byte(s), &filters); err != nil {
			return badArgs("select_filters must be {column: {op: value}}")
		}
	}
	known := map[string]bool{}
	for _, c := range invoiceColumns {
		known[c] = true
	}
	for _, c := range cols {
		if c != "*" && !known[c] {
			return badArgs("unknown column %q", c)
		}
	}
	for c, ops := range filters {
		if !known[c] {
			return badArgs("unknown column %q", c)
		}
		for op := range ops {
			switch op {
			case "eq", "neq", "gt", "gte", "lt", "lte", "in", "notin":
			default:
				return badArgs("unknown operator %q on %s", op, c)
			}
		}
	}
	out := []map[string]any{}
	for _, row := range m.invoiceRows() {
		if !rowMatches(row, filters) {
			continue
		}
		if len(cols) == 1 && cols[0] == "*" {
			out = append(out, row)
			continue
		}
		kept := map[string]any{}
		for _, c := range cols {
			if c == "*" {
				kept = row
				break
			}
			kept[c] = row[c]
		}
		out = append(out, kept)
	}
	return jsonReply(200, out)
}

func rowMatches(row map[string]any, filters map[string]map[string]any) bool {
	for c, ops := range filters {
		for op, want := range ops {
			if !holdsValue(row[c], op, want) {
				return false
			}
		}
	}
	return true
}

// holdsValue compares a column's value with a filter's: numerically when
// both are numbers (the CLI may send a number as a string), else as text.
func holdsValue(have any, op string, want any) bool {
	if op == "in" || op == "notin" {
		list, _ := want.([]any)
		in := false
		for _, w := range list {
			if holdsValue(have, "eq", w) {
				in = true
			}
		}
		return in == (op == "in")
	}
	c, ok := compareValues(have, want)
	if !ok {
		return op == "neq"
	}
	switch op {
	case "eq", "neq", "gt", "gte", "lt", "lte":
		return holds(op, c)
	}
	return false
}

func compareValues(have, want any) (int, bool) {
	if hb, ok := have.(bool); ok {
		wb, ok := want.(bool)
		if !ok {
			return 0, false
		}
		if hb == wb {
			return 0, true
		}
		return 1, true
	}
	if have == nil || want == nil {
		if have == nil && want == nil {
			return 0, true
		}
		return 0, false
	}
	hn, hok := number(have)
	wn, wok := number(want)
	if hok && wok {
		switch {
		case hn < wn:
			return -1, true
		case hn > wn:
			return 1, true
		}
		return 0, true
	}
	hs, ws := fmt.Sprint(have), fmt.Sprint(want)
	switch {
	case hs < ws:
		return -1, true
	case hs > ws:
		return 1, true
	}
	return 0, true
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}
