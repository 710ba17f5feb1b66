package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"testing"
	"time"
)

type chargesPage struct {
	Results   []chargeItem `json:"results"`
	Count     int          `json:"count"`
	Total     int          `json:"total"`
	NextToken *string      `json:"next_token"`
}

func (h *harness) charges(params map[string]any) chargesPage {
	h.t.Helper()
	return h.history("/api/v0/charges/", params)
}

func (h *harness) history(path string, params map[string]any) chargesPage {
	h.t.Helper()
	v := url.Values{}
	for k, p := range params {
		if s, ok := p.(string); ok {
			v.Set(k, s)
			continue
		}
		b, _ := json.Marshal(p)
		v.Set(k, string(b))
	}
	var out chargesPage
	if st, _, b := h.do("GET", path+"?"+v.Encode(), nil, &out); st != 200 {
		h.t.Fatalf("%s: %d %s", path, st, b)
	}
	return out
}

// chargesTimeline rents two instances and runs them across a UTC
// midnight, with a stop and a start, and destroys one.
func chargesTimeline(t *testing.T) (*harness, float64) {
	h := newHarness(t, Config{Seed: 5})
	a := h.create(h.cheapOffer().ID, "a")
	h.clock.Advance(3 * time.Hour)
	b := h.create(h.cheapOffer().ID, "b")
	h.clock.Advance(10 * time.Hour) // past midnight (t0 is noon)
	h.setState(a, "stopped")
	h.clock.Advance(5 * time.Hour)
	h.setState(a, "running")
	h.clock.Advance(20 * time.Hour)
	if st, _, body := h.do("DELETE", fmt.Sprintf("/api/v0/instances/%d/", b), nil, nil); st != 200 {
		t.Fatalf("destroy: %d %s", st, body)
	}
	h.clock.Advance(time.Hour)
	total := 0.0
	for _, e := range h.m.Ledger() {
		total += e.Amount
	}
	if total <= 0 {
		t.Fatal("nothing charged")
	}
	return h, total
}

// TestChargesFromTheLedger: GET /api/v0/charges/ gives one charge per
// instance and UTC day, in the CLI's shape, summing to the ledger; day
// and type filters, limit, after_token and latest_first work as the
// official CLI's show invoices-v1 --charges uses them.
func TestChargesFromTheLedger(t *testing.T) {
	t.Parallel()
	h, total := chargesTimeline(t)
	all := h.charges(map[string]any{"limit": 100})
	sum := 0.0
	days := map[string]bool{}
	for _, c := range all.Results {
		sum += c.Amount
		items := 0.0
		for _, it := range c.Items {
			items += it.Amount
		}
		if math.Abs(items-c.Amount) > 1e-9 || c.Type != "instance" || c.Source == nil || c.Start == nil || c.End == nil || c.Metadata == nil {
			t.Fatalf("charge %+v: items sum to %.6f", c, items)
		}
		start, end := time.Unix(int64(*c.Start), 0).UTC(), time.Unix(int64(*c.End), 0).UTC()
		if start.Truncate(24*time.Hour) != end.Add(-time.Second).Truncate(24*time.Hour) && !start.Equal(end) {
			t.Errorf("charge %s spans %s to %s, more than one UTC day", *c.Source, start, end)
		}
		days[*c.Source+start.Format(time.DateOnly)] = true
	}
	if math.Abs(sum-total) > 1e-9 {
		t.Fatalf("charges sum to $%.6f, the ledger to $%.6f", sum, total)
	}
	// Two instances over three UTC days (noon to noon and a bit).
	if len(all.Results) < 4 || all.Total != len(all.Results) || all.Count != len(all.Results) || all.NextToken != nil {
		t.Fatalf("%d charges (count %d, total %d, next %v), want one per instance and day", len(all.Results), all.Count, all.Total, all.NextToken)
	}

	// A day range leaves out the first day's charges.
	day2 := float64(t0.Truncate(24 * time.Hour).Add(24 * time.Hour).Unix())
	later := h.charges(map[string]any{"select_filters": map[string]any{"day": map[string]any{"gte": day2, "lte": day2 + 1e6}}})
	if later.Total == 0 || later.Total >= all.Total {
		t.Errorf("from day 2: %d of %d charges", later.Total, all.Total)
	}
	if v := h.charges(map[string]any{"select_filters": map[string]any{"type": map[string]any{"in": []string{"volume", "serverless"}}}}); v.Total != 0 {
		t.Errorf("%d volume or serverless charges, want none", v.Total)
	}

	// Pages of one, walked by after_token, are the whole list in order;
	// latest_first reverses it.
	var walked []chargeItem
	params := map[string]any{"limit": 1}
	for range 100 {
		p := h.charges(params)
		walked = append(walked, p.Results...)
		if p.NextToken == nil {
			break
		}
		params["after_token"] = *p.NextToken
	}
	if len(walked) != len(all.Results) {
		t.Fatalf("pages of one gave %d charges, one page %d", len(walked), len(all.Results))
	}
	latest := h.charges(map[string]any{"limit": 100, "latest_first": "true"})
	for i := range walked {
		if *walked[i].Source != *all.Results[i].Source || *latest.Results[len(latest.Results)-1-i].Start != *all.Results[i].Start {
			t.Fatalf("charge %d: pages, one page and latest first disagree", i)
		}
	}
	if st, _, _ := h.do("GET", "/api/v0/charges/?select_filters="+url.QueryEscape(`{"nonsense":{"eq":1}}`), nil, nil); st != 400 {
		t.Errorf("an unknown filter column: %d, want 400", st)
	}
}

// TestInvoicesOnBothRoutes: the opening credit on /api/v1/invoices/ (sent
// negative, as the CLI flips it), and charges and payments on the
// deprecated /api/v0/users/me/invoices, summing to the ledger.
func TestInvoicesOnBothRoutes(t *testing.T) {
	t.Parallel()
	h, total := chargesTimeline(t)
	inv := h.history("/api/v1/invoices/", map[string]any{"limit": 20, "latest_first": "false",
		"select_filters": map[string]any{"when": map[string]any{"gte": float64(t0.Add(-time.Hour).Unix()), "lte": float64(t0.Add(100 * time.Hour).Unix())}}})
	if len(inv.Results) != 1 || inv.Results[0].Type != "credit" || math.Abs(inv.Results[0].Amount+DefaultBalance) > 1e-9 ||
		inv.Results[0].Metadata["invoice_id"] == nil {
		t.Fatalf("invoices %+v, want the opening credit of $%.2f", inv.Results, DefaultBalance)
	}
	if p := h.history("/api/v1/invoices/", map[string]any{"select_filters": map[string]any{"service": map[string]any{"in": []string{"bitpay"}}}}); p.Total != 0 {
		t.Errorf("%d bitpay invoices, want none", p.Total)
	}

	var out struct {
		Invoices []invoiceRow   `json:"invoices"`
		Current  map[string]any `json:"current"`
	}
	q := fmt.Sprintf("/api/v0/users/me/invoices?owner=me&sdate=%d&edate=%d&inc_charges=true", t0.Add(-time.Hour).Unix(), t0.Add(100*time.Hour).Unix())
	if st, _, b := h.do("GET", q, nil, &out); st != 200 {
		t.Fatalf("%d %s", st, b)
	}
	charged, paid := 0.0, 0.0
	for _, r := range out.Invoices {
		switch r.Type {
		case "charge":
			charged += r.Amount
			if r.InstanceID == nil {
				t.Errorf("charge row %d names no instance", r.ID)
			}
		case "payment":
			paid += r.Amount
		}
	}
	if math.Abs(charged-total) > 1e-9 || math.Abs(paid-DefaultBalance) > 1e-9 || out.Current == nil {
		t.Fatalf("rows charge $%.6f and pay $%.2f (current %v); the ledger charged $%.6f", charged, paid, out.Current, total)
	}
	if st, _, b := h.do("GET", "/api/v0/users/me/invoices?owner=me&sdate=null&edate=null&inc_charges=false", nil, &out); st != 200 || len(out.Invoices) != 1 {
		t.Fatalf("credits only: %d, %d rows: %s", st, len(out.Invoices), b)
	}
}
