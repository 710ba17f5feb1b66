package vast

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
)

var _ provider.Charger = (*Client)(nil)

// chargesPageSize is the most charges one page of GET /api/v0/charges/
// holds.
const chargesPageSize = 100

// chargesPage is one answer of GET /api/v0/charges/ (the envelope `vastai
// show invoices-v1 --charges` pages through). Every field the client
// relies on is a pointer: absent is not zero.
type chargesPage struct {
	Results   *[]chargeRow    `json:"results"`
	Count     *int            `json:"count"`
	Total     *int            `json:"total"`
	NextToken json.RawMessage `json:"next_token"`
}

// chargeRow is one charge, or one item of a charge.
type chargeRow struct {
	Type     string         `json:"type"`
	Source   *string        `json:"source"`
	Amount   *float64       `json:"amount"`
	Start    *float64       `json:"start"`
	End      *float64       `json:"end"`
	Items    []chargeRow    `json:"items"`
	Metadata map[string]any `json:"metadata"`
}

// chargeKinds maps the marketplace's item types to vastfleet's kinds.
var chargeKinds = map[string]string{
	"gpu": provider.ChargeCompute, "compute": provider.ChargeCompute,
	"storage": provider.ChargeStorage, "disk": provider.ChargeStorage,
	"bandwidth": provider.ChargeBandwidth, "network": provider.ChargeBandwidth,
}

// chargesQuery is the query string of one page: instance charges whose
// day is in [from, to], oldest first.
func chargesQuery(q provider.ChargeQuery, after string) string {
	filters, _ := json.Marshal(map[string]any{
		"day":  map[string]int64{"gte": q.From.UTC().Truncate(24 * time.Hour).Unix(), "lte": q.To.Unix()},
		"type": map[string][]string{"in": {"instance"}},
	})
	s := "select_filters=" + url.QueryEscape(string(filters)) + "&latest_first=false&limit=" + strconv.Itoa(chargesPageSize)
	if after != "" {
		s += "&after_token=" + url.QueryEscape(after)
	}
	return s
}

// Charges fetches every page of the account's instance charges in q's
// days. Nothing is returned unless every page parsed, the pages hold
// exactly the total the first announced, and no charge names another
// account.
func (c *Client) Charges(ctx context.Context, q provider.ChargeQuery) ([]provider.Charge, error) {
	const path = "/api/v0/charges/"
	var (
		out   []provider.Charge
		total = -1
		rows  int
		after string
		seen  = map[[2]int64]bool{}
	)
	for page := 1; ; page++ {
		if page > maxPages {
			return nil, fmt.Errorf("GET %s: more than %d pages: %w", path, maxPages, provider.ErrChargesPartial)
		}
		cl := call{method: http.MethodGet, path: path, query: chargesQuery(q, after), policy: retryRead}
		resp, err := c.do(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("charges page %d: %w", page, err)
		}
		if resp.status < 200 || resp.status > 299 {
			return nil, fmt.Errorf("charges page %d: %w", page, c.apiError(cl, opOther, resp.status, resp.body))
		}
		if ct := resp.header.Get("Content-Type"); !isJSONType(ct) {
			return nil, fmt.Errorf("charges page %d is %q, not JSON (%q): %w", page, ct,
				c.redact(trimMsg(string(resp.body))), provider.ErrChargesUnreadable)
		}
		var p chargesPage
		if err := json.Unmarshal(resp.body, &p); err != nil {
			return nil, fmt.Errorf("charges page %d: %v (%q): %w", page, err, c.redact(trimMsg(string(resp.body))), provider.ErrChargesUnreadable)
		}
		if err := c.checkSuccess(cl, opOther, resp); err != nil {
			return nil, fmt.Errorf("charges page %d: %w", page, err)
		}
		if p.Results == nil || p.Total == nil {
			return nil, fmt.Errorf("charges page %d has no results or no total: %w", page, provider.ErrChargesUnreadable)
		}
		if p.Count != nil && *p.Count != len(*p.Results) {
			return nil, fmt.Errorf("charges page %d says it holds %d charges but holds %d: %w", page, *p.Count, len(*p.Results), provider.ErrChargesPartial)
		}
		if total >= 0 && *p.Total != total {
			return nil, fmt.Errorf("charges total changed from %d to %d on page %d: %w", total, *p.Total, page, provider.ErrChargesPartial)
		}
		total = *p.Total
		for i, row := range *p.Results {
			rows++
			ch, ok, err := readCharge(row, q.Account)
			if err != nil {
				return nil, fmt.Errorf("charges page %d, charge %d: %w", page, i+1, err)
			}
			if !ok {
				continue // a volume's or an endpoint's: not an instance's
			}
			k := [2]int64{ch.InstanceID, ch.Day.Unix()}
			if seen[k] {
				return nil, fmt.Errorf("instance %d charged twice for %s: the pages overlap: %w", ch.InstanceID, ch.Day.Format(time.DateOnly), provider.ErrChargesPartial)
			}
			seen[k] = true
			out = append(out, ch)
		}
		next := tokenText(p.NextToken)
		if next == "" {
			break
		}
		if next == after {
			return nil, fmt.Errorf("charges token repeated on page %d: %w", page, provider.ErrChargesPartial)
		}
		after = next
	}
	if rows != total {
		return nil, fmt.Errorf("the charges pages hold %d charges but the total is %d: %w", rows, total, provider.ErrChargesPartial)
	}
	return out, nil
}

// epoch reads epoch seconds; zero time for none.
func epoch(v *float64) time.Time {
	if v == nil || *v <= 0 || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return time.Time{}
	}
	sec, frac := math.Modf(*v)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

// metaInt reads a whole number from a charge's metadata.
func metaInt(m map[string]any, key string) (int64, bool) {
	switch v := m[key].(type) {
	case float64:
		if v == math.Trunc(v) {
			return int64(v), true
		}
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// readCharge reads one charge row; ok is false for a charge that is not an
// instance's.
func readCharge(row chargeRow, account int64) (provider.Charge, bool, error) {
	for _, key := range []string{"user_id", "client_id", "account_id"} {
		if id, ok := metaInt(row.Metadata, key); ok && account != 0 && id != account {
			return provider.Charge{}, false, fmt.Errorf("%s %d, not this key's account %d: %w", key, id, account, provider.ErrChargesOtherAccount)
		}
	}
	if row.Type != "instance" {
		return provider.Charge{}, false, nil
	}
	if row.Amount == nil {
		return provider.Charge{}, false, fmt.Errorf("no amount: %w", provider.ErrChargesUnreadable)
	}
	id, ok := metaInt(row.Metadata, "instance_id")
	if !ok && row.Source != nil {
		id, _ = strconv.ParseInt(strings.TrimPrefix(*row.Source, "instance-"), 10, 64)
	}
	if id <= 0 {
		return provider.Charge{}, false, fmt.Errorf("no instance id (source %q): %w", deref(row.Source), provider.ErrChargesUnreadable)
	}
	ch := provider.Charge{InstanceID: id, Amount: *row.Amount, Start: epoch(row.Start), End: epoch(row.End)}
	if day, ok := metaInt(row.Metadata, "day"); ok {
		ch.Day = time.Unix(day, 0).UTC()
	} else {
		ch.Day = ch.Start.Truncate(24 * time.Hour)
	}
	if ch.Start.IsZero() && ch.Day.IsZero() {
		return provider.Charge{}, false, fmt.Errorf("instance %d: a charge with no date: %w", id, provider.ErrChargesUnreadable)
	}
	sum := 0.0
	for _, it := range row.Items {
		if it.Amount == nil {
			return provider.Charge{}, false, fmt.Errorf("instance %d: an item with no amount: %w", id, provider.ErrChargesUnreadable)
		}
		kind, ok := chargeKinds[it.Type]
		if !ok {
			kind = it.Type
		}
		sum += *it.Amount
		ch.Lines = append(ch.Lines, provider.ChargeLine{Kind: kind, Amount: *it.Amount, Start: epoch(it.Start), End: epoch(it.End)})
	}
	switch {
	case len(row.Items) == 0 && *row.Amount != 0:
		// A charge not broken down: all of it in one line of its own.
		ch.Lines = []provider.ChargeLine{{Kind: "instance", Amount: *row.Amount, Start: ch.Start, End: ch.End}}
	case math.Abs(sum-*row.Amount) > 1e-6+1e-9*math.Abs(*row.Amount):
		return provider.Charge{}, false, fmt.Errorf("instance %d: items sum to $%.6f, the charge is $%.6f: %w", id, sum, *row.Amount, provider.ErrChargesPartial)
	}
	return ch, true, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
