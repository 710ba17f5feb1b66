package sim

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Billing history, from the simulator's own ledger, in the shapes the
// official CLI reads (vast.py's show invoices-v1 and the deprecated show
// invoices):
//   - GET /api/v0/charges/: one charge per instance and UTC day (its day
//     the start of that day), its
//     compute, storage and bandwidth as items; select_filters on day
//     (epoch seconds, gte/lte) and type (in: instance, volume,
//     serverless); latest_first; limit (at most 100); after_token.
//     Answer {results, count, total, next_token}; each result is {type,
//     source ("instance-<id>"), amount (dollars), start, end (epoch
//     seconds), description, items, metadata}.
//   - GET /api/v1/invoices/: the account's credits, same envelope, with
//     when for the date and service for the kind; the CLI flips the sign
//     of every type but transfer and payout, so a credit goes out
//     negative.
//   - GET /api/v0/users/me/invoices: {invoices, current}; rows of
//     {id, type (charge or payment), description, quantity, rate, amount,
//     timestamp, instance_id}; sdate/edate bound timestamp and
//     inc_charges=false leaves the charges out.

// chargeItem is one row of the charges and invoices answers.
type chargeItem struct {
	Type        string         `json:"type"`
	Source      *string        `json:"source"`
	Amount      float64        `json:"amount"`
	Start       *float64       `json:"start"`
	End         *float64       `json:"end"`
	Description string         `json:"description"`
	Items       []chargeItem   `json:"items"`
	Metadata    map[string]any `json:"metadata"`
	// at is what the date filter reads: a charge's day, an invoice's
	// date (epoch seconds).
	at float64
}

func epochPtr(t time.Time) *float64 {
	if t.IsZero() {
		return nil
	}
	v := float64(t.Unix())
	return &v
}

func strPtr(s string) *string { return &s }

// kindLabel names a ledger kind as a charge item.
var kindLabel = map[string]string{"compute": "gpu", "storage": "storage", "bandwidth": "bandwidth"}

// dailyCharges splits the ledger by instance and UTC day: a ledger entry
// spanning midnight is shared in proportion to its time on each side.
func (m *Market) dailyCharges() []chargeItem {
	type key struct {
		id  int64
		day int64
	}
	type acc struct {
		start, end time.Time
		kinds      map[string]float64
		spans      map[string][2]time.Time
	}
	days := map[key]*acc{}
	add := func(e LedgerEntry, from, to time.Time, amount float64) {
		k := key{e.InstanceID, from.UTC().Truncate(24 * time.Hour).Unix()}
		a := days[k]
		if a == nil {
			a = &acc{start: from, end: to, kinds: map[string]float64{}, spans: map[string][2]time.Time{}}
			days[k] = a
		}
		a.start, a.end = minTime(a.start, from), maxTime(a.end, to)
		a.kinds[e.Kind] += amount
		s, ok := a.spans[e.Kind]
		if !ok {
			s = [2]time.Time{from, to}
		}
		a.spans[e.Kind] = [2]time.Time{minTime(s[0], from), maxTime(s[1], to)}
	}
	for _, e := range m.st.Ledger {
		span := e.To.Sub(e.From)
		for from := e.From; from.Before(e.To) || (span == 0 && from.Equal(e.To)); {
			midnight := from.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
			to := minTime(midnight, e.To)
			share := 1.0
			if span > 0 {
				share = float64(to.Sub(from)) / float64(span)
			}
			add(e, from, to, e.Amount*share)
			if span == 0 {
				break
			}
			from = to
		}
	}
	out := make([]chargeItem, 0, len(days))
	for k, a := range days {
		c := chargeItem{Type: "instance", Source: strPtr(fmt.Sprintf("instance-%d", k.id)),
			Start: epochPtr(a.start), End: epochPtr(a.end),
			Description: fmt.Sprintf("Instance %d: GPU, storage and bandwidth", k.id),
			Items:       []chargeItem{}, Metadata: map[string]any{"instance_id": k.id, "day": k.day, "user_id": simUserID}, at: float64(k.day)}
		for _, kind := range []string{"compute", "storage", "bandwidth"} {
			amt, ok := a.kinds[kind]
			if !ok {
				continue
			}
			s := a.spans[kind]
			c.Amount += amt
			c.Items = append(c.Items, chargeItem{Type: kindLabel[kind], Amount: amt, Start: epochPtr(s[0]), End: epochPtr(s[1]),
				Description: fmt.Sprintf("%s, %s", kindLabel[kind], s[1].Sub(s[0]).Round(time.Second)), Items: []chargeItem{}, Metadata: map[string]any{}})
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b chargeItem) int {
		return cmp.Or(cmp.Compare(*a.Start, *b.Start), strings.Compare(*a.Source, *b.Source))
	})
	return out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// openingCredit is the account's first deposit: what it holds now plus
// everything charged since.
func (m *Market) openingCredit() float64 {
	total := m.st.Balance
	for _, e := range m.st.Ledger {
		total += e.Amount
	}
	return total
}

// openedAt is when the account was opened: the market's creation, or for
// a market saved before that was kept, its first charge.
func (m *Market) openedAt() time.Time {
	if !m.st.OpenedAt.IsZero() {
		return m.st.OpenedAt
	}
	t := m.st.BilledTo
	for _, e := range m.st.Ledger {
		t = minTime(t, e.From)
	}
	return t
}

// historyQuery is the query string of the two v1 history routes.
type historyQuery struct {
	from, to    float64 // the date column's range, epoch seconds
	types       []string
	latestFirst bool
	limit       int
	offset      int
}

func parseHistoryQuery(r *http.Request, dateCol, typeCol string) (historyQuery, error) {
	q := r.URL.Query()
	h := historyQuery{from: math.Inf(-1), to: math.Inf(1), limit: 20}
	if s := q.Get("select_filters"); s != "" {
		var sf map[string]map[string]any
		if err := json.Unmarshal([]byte(s), &sf); err != nil {
			return h, fmt.Errorf("select_filters must be a JSON object of {column: {op: value}}")
		}
		for col, ops := range sf {
			switch col {
			case dateCol:
				for op, v := range ops {
					f, ok := asNumber(v, false)
					if !ok {
						return h, fmt.Errorf("%s %s wants epoch seconds", col, op)
					}
					switch op {
					case "gte", "gt":
						h.from = f
					case "lte", "lt":
						h.to = f
					default:
						return h, fmt.Errorf("%s: operator %q is not supported", col, op)
					}
				}
			case typeCol:
				l, ok := ops["in"].([]any)
				if !ok {
					return h, fmt.Errorf("%s wants {\"in\": [...]}", col)
				}
				for _, v := range l {
					s, _ := v.(string)
					h.types = append(h.types, s)
				}
			default:
				return h, fmt.Errorf("%s is not a valid filter column", col)
			}
		}
	}
	h.latestFirst = q.Get("latest_first") == "true"
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return h, fmt.Errorf("limit must be an integer")
		}
		h.limit = n
	}
	if h.limit <= 0 {
		h.limit = 20
	}
	h.limit = min(h.limit, 100)
	if tok := q.Get("after_token"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "simhist:"))
		if err != nil || err2 != nil || !strings.HasPrefix(string(b), "simhist:") || n < 0 {
			return h, fmt.Errorf("after_token is not valid")
		}
		h.offset = n
	}
	return h, nil
}

// page filters items by date and type, orders them, and cuts the page.
func (h historyQuery) page(items []chargeItem) map[string]any {
	var kept []chargeItem
	for _, c := range items {
		if c.at < h.from || c.at > h.to {
			continue
		}
		if len(h.types) > 0 && !slices.Contains(h.types, c.Type) {
			continue
		}
		kept = append(kept, c)
	}
	if h.latestFirst {
		slices.Reverse(kept)
	}
	total := len(kept)
	rest := kept[min(h.offset, total):]
	var next any
	if len(rest) > h.limit {
		rest = rest[:h.limit]
		next = base64.RawURLEncoding.EncodeToString([]byte("simhist:" + strconv.Itoa(h.offset+h.limit)))
	}
	if rest == nil {
		rest = []chargeItem{}
	}
	return map[string]any{"results": rest, "count": len(rest), "total": total, "next_token": next}
}

func (m *Market) hCharges(r *http.Request, _ []byte, _ time.Time) reply {
	h, err := parseHistoryQuery(r, "day", "type")
	if err != nil {
		return badArgs("%v", err)
	}
	return jsonReply(200, h.page(m.dailyCharges()))
}

// credits are the account's deposits as invoices: the opening credit.
func (m *Market) credits() []chargeItem {
	at := m.openedAt()
	return []chargeItem{{Type: "credit", Source: strPtr("stripe"), Amount: -m.openingCredit(), Start: epochPtr(at), End: epochPtr(at),
		Description: "Opening credit of the simulated account", Items: []chargeItem{},
		Metadata: map[string]any{"invoice_id": 1, "service": "stripe_payments"}, at: float64(at.Unix())}}
}

func (m *Market) hInvoicesV1(r *http.Request, _ []byte, _ time.Time) reply {
	h, err := parseHistoryQuery(r, "when", "service")
	if err != nil {
		return badArgs("%v", err)
	}
	items := m.credits()
	if len(h.types) > 0 {
		// service filters on the payment processor, which metadata holds.
		var kept []chargeItem
		for _, c := range items {
			if slices.Contains(h.types, c.Metadata["service"].(string)) {
				kept = append(kept, c)
			}
		}
		items, h.types = kept, nil
	}
	return jsonReply(200, h.page(items))
}

// invoiceRow is a row of the deprecated /users/me/invoices.
type invoiceRow struct {
	ID          int64   `json:"id"`
	Type        string  `json:"type"` // charge or payment
	Description string  `json:"description"`
	Quantity    float64 `json:"quantity"` // hours for a charge
	Rate        float64 `json:"rate"`     // $/h
	Amount      float64 `json:"amount"`
	Timestamp   float64 `json:"timestamp"`
	InstanceID  *int64  `json:"instance_id"`
}

func (m *Market) hUserInvoices(r *http.Request, _ []byte, _ time.Time) reply {
	q := r.URL.Query()
	from, to := math.Inf(-1), math.Inf(1)
	for name, dst := range map[string]*float64{"sdate": &from, "edate": &to} {
		if s := q.Get(name); s != "" && s != "null" && s != "None" {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return badArgs("%s must be epoch seconds", name)
			}
			*dst = f
		}
	}
	withCharges := q.Get("inc_charges") != "false"
	var rows []invoiceRow
	at := m.openedAt()
	rows = append(rows, invoiceRow{ID: 1, Type: "payment", Description: "Opening credit of the simulated account",
		Quantity: 1, Rate: m.openingCredit(), Amount: m.openingCredit(), Timestamp: float64(at.Unix())})
	charged := 0.0
	for i, e := range m.st.Ledger {
		charged += e.Amount
		if !withCharges {
			continue
		}
		id := e.InstanceID
		hours := e.To.Sub(e.From).Hours()
		rate := 0.0
		if hours > 0 {
			rate = e.Amount / hours
		}
		rows = append(rows, invoiceRow{ID: int64(i + 2), Type: "charge", InstanceID: &id, Quantity: hours, Rate: rate, Amount: e.Amount,
			Timestamp: float64(e.To.Unix()), Description: fmt.Sprintf("Instance %d %s", id, kindLabel[e.Kind])})
	}
	kept := []invoiceRow{}
	for _, row := range rows {
		if row.Timestamp >= from && row.Timestamp <= to {
			kept = append(kept, row)
		}
	}
	return jsonReply(200, map[string]any{"invoices": kept,
		"current": map[string]any{"charges": charged, "service_fee": 0, "total": charged, "credit": m.st.Balance}})
}
