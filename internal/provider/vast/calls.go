package vast

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/vasterr"
)

// SearchRequest is the request `vastai search offers` sends for q: the
// query itself POSTed to /api/v0/bundles/, or with --new (newForm) wrapped
// as {"select_cols":["*"],"q":q} and PUT to /api/v0/search/asks/.
func SearchRequest(q market.Query, newForm bool) (method, path string, body any) {
	if newForm {
		return http.MethodPut, "/api/v0/search/asks/", newSearchBody{SelectCols: []string{"*"}, Q: q}
	}
	return http.MethodPost, "/api/v0/bundles/", q
}

// SearchBodyJSON is SearchRequest with its body as JSON: compact, or
// with sorted, indented at every level with sorted keys, for comparison
// with what the vastai CLI prints.
func SearchBodyJSON(q market.Query, newForm, sorted bool) (method, path string, body []byte, err error) {
	method, path, v := SearchRequest(q, newForm)
	if body, err = json.Marshal(v); err != nil || !sorted {
		return method, path, body, err
	}
	// Re-marshal through a map so every level prints with sorted keys.
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return "", "", nil, err
	}
	body, err = json.MarshalIndent(m, "", "  ")
	return method, path, body, err
}

// newSearchBody is the body of the --new search form.
type newSearchBody struct {
	SelectCols []string     `json:"select_cols"`
	Q          market.Query `json:"q"`
}

// SearchOffers posts the query to /api/v0/bundles/ as the CLI does.
func (c *Client) SearchOffers(ctx context.Context, q market.Query) ([]market.Offer, error) {
	return c.search(ctx, q, false)
}

// SearchOffersNew runs the search in the CLI's --new form (PUT
// /api/v0/search/asks/); the answer is the same offer list.
func (c *Client) SearchOffersNew(ctx context.Context, q market.Query) ([]market.Offer, error) {
	return c.search(ctx, q, true)
}

func (c *Client) search(ctx context.Context, q market.Query, newForm bool) ([]market.Offer, error) {
	method, path, body := SearchRequest(q, newForm)
	// A search changes nothing: retried as a read in either form.
	cl := call{method: method, path: path, body: body, policy: retryRead}
	resp, err := c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	if resp.status < 200 || resp.status > 299 {
		return nil, c.apiError(cl, opOther, resp.status, resp.body)
	}
	if ct := resp.header.Get("Content-Type"); !isJSONType(ct) {
		return nil, fmt.Errorf("%s %s: HTTP %d: answer is %q, not application/json: %q",
			cl.method, cl.path, resp.status, ct, c.redact(trimMsg(string(resp.body))))
	}
	// Offer lists are the largest answers (a sweep reads the whole
	// market): market's scanner reads them several times faster than
	// encoding/json.
	offers, ok, notes, err := market.DecodeSearchAnswerNotes(resp.body)
	if n := notes.String(); n != "" {
		// A marketplace whose types drift must not fail the search; the
		// odd offers are read leniently or dropped, and said so.
		c.log.WarnContext(ctx, "search answer: "+n, "method", cl.method, "path", cl.path)
	}
	if err != nil {
		if derr := c.decode(cl, opOther, resp, &struct{}{}); derr != nil {
			return nil, derr // not JSON at all: the usual message
		}
		return nil, fmt.Errorf("%s %s: reading the offers: %v", cl.method, cl.path, err)
	}
	if !ok {
		if err := c.checkSuccess(cl, opOther, resp); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s %s: answer has no offers list", cl.method, cl.path)
	}
	if offers == nil {
		offers = []market.Offer{}
	}
	return offers, nil
}

// createBody is the §6 body, with the keys the CLI sends as null or false.
type createBody struct {
	IDs            []int64           `json:"ids,omitempty"` // bulk create only
	ClientID       string            `json:"client_id"`
	Image          string            `json:"image"`
	Env            map[string]string `json:"env"`
	Price          *float64          `json:"price"`
	Disk           float64           `json:"disk"`
	Label          *string           `json:"label"`
	Extra          *string           `json:"extra"`
	Onstart        *string           `json:"onstart"`
	ImageLogin     *string           `json:"image_login"`
	PythonUTF8     bool              `json:"python_utf8"`
	LangUTF8       bool              `json:"lang_utf8"`
	UseJupyterLab  bool              `json:"use_jupyter_lab"`
	JupyterDir     *string           `json:"jupyter_dir"`
	Force          bool              `json:"force"`
	CancelUnavail  bool              `json:"cancel_unavail"`
	TemplateHashID *string           `json:"template_hash_id"`
	User           *string           `json:"user"`
	Runtype        string            `json:"runtype"`
}

// newCreateBody is the body vast's create takes for req.
func newCreateBody(req provider.CreateRequest) createBody {
	env := req.Env
	if env == nil {
		env = map[string]string{}
	}
	runtype := req.Runtype
	if runtype == "" {
		runtype = "ssh" // the CLI's default
	}
	return createBody{
		ClientID: "me", Image: req.Image, Env: env, Price: req.Price, Disk: req.Disk,
		Label: strOrNil(req.Label), Onstart: strOrNil(req.Onstart), Runtype: runtype,
		// Fail rather than get a stopped (storage-billed) instance when the
		// offer cannot be scheduled now.
		CancelUnavail: true,
	}
}

// CreateInstances rents the offers of offerIDs with one POST
// /api/v0/asks/bulk/, as the vastai CLI's create instances does. vast does
// not document the answer, so a 2xx answer is all it reads: the caller
// confirms by listing the label. Like CreateInstance it resends only after
// a 429, and a call that may have reached the server wraps
// provider.ErrMaybeCreated.
func (c *Client) CreateInstances(ctx context.Context, offerIDs []int64, req provider.CreateRequest) error {
	if len(offerIDs) == 0 || len(offerIDs) > provider.BulkChunk {
		return fmt.Errorf("create instances: %d offer ids; a call takes 1 to %d", len(offerIDs), provider.BulkChunk)
	}
	body := newCreateBody(req)
	body.IDs = offerIDs
	cl := call{method: http.MethodPost, path: "/api/v0/asks/bulk/", body: body, policy: retryCreate}
	if err := ctx.Err(); err != nil {
		return err // nothing was sent
	}
	resp, err := c.do(ctx, cl)
	if err != nil {
		var te *transportError
		if errors.As(err, &te) {
			return fmt.Errorf("%w: %w", provider.ErrMaybeCreated, err)
		}
		return err
	}
	if resp.status < 200 || resp.status > 299 {
		return c.apiError(cl, opCreate, resp.status, resp.body)
	}
	return nil
}

func strOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// CreateInstance rents an offer. Only a 429 (a refused request) is retried:
// after a transport error, a timeout, an unreadable answer or a 5xx the
// instance may exist, and the error wraps provider.ErrMaybeCreated.
func (c *Client) CreateInstance(ctx context.Context, offerID int64, req provider.CreateRequest) (provider.Created, error) {
	body := newCreateBody(req)
	cl := call{method: http.MethodPut, path: fmt.Sprintf("/api/v0/asks/%d/", offerID), body: body, policy: retryCreate}
	if err := ctx.Err(); err != nil {
		return provider.Created{}, err // nothing was sent
	}
	resp, err := c.do(ctx, cl)
	if err != nil {
		var te *transportError
		if errors.As(err, &te) {
			// The request may have reached the server: never resend it.
			return provider.Created{}, fmt.Errorf("%w: %w", provider.ErrMaybeCreated, err)
		}
		return provider.Created{}, err // cancelled before (re)sending
	}
	if resp.status < 200 || resp.status > 299 {
		return provider.Created{}, c.apiError(cl, opCreate, resp.status, resp.body)
	}
	if err := c.checkSuccess(cl, opCreate, resp); err != nil {
		return provider.Created{}, err
	}
	var out provider.Created
	if err := json.Unmarshal(resp.body, &out); err != nil || out.NewContract == 0 {
		return provider.Created{}, fmt.Errorf("%w: %s %s: HTTP %d without an instance id: %q",
			provider.ErrMaybeCreated, cl.method, cl.path, resp.status, c.redact(trimMsg(string(resp.body))))
	}
	out.Success = true
	return out, nil
}

// pageSize is the v1 listing's maximum page.
const pageSize = 25

// maxPages stops a server that keeps handing out tokens.
const maxPages = 10000

// listPage is one answer of GET /api/v1/instances/.
type listPage struct {
	Success        *bool             `json:"success"`
	TotalInstances *int              `json:"total_instances"`
	NextToken      json.RawMessage   `json:"next_token"`
	Instances      []json.RawMessage `json:"instances"`
}

// readRow decodes one listing row. A row in a shape the client does not
// read (vast's show-instance docs have ports as a list of numbers) is
// quarantined: kept by its id and label with the status "unknown", so the
// rest of the listing is used and the row is never taken for gone. A row
// whose id cannot be read could be any instance: that fails the listing.
func readRow(raw json.RawMessage) (provider.Instance, error) {
	var in provider.Instance
	err := json.Unmarshal(raw, &in)
	if err == nil {
		if in.ID <= 0 {
			return provider.Instance{}, fmt.Errorf("a row without an id: %w", provider.ErrIncompleteListing)
		}
		return in, nil
	}
	var head struct {
		ID    json.RawMessage `json:"id"`
		Label json.RawMessage `json:"label"`
	}
	if json.Unmarshal(raw, &head) != nil {
		return provider.Instance{}, fmt.Errorf("a row is not a JSON object: %w", provider.ErrIncompleteListing)
	}
	var id int64
	if json.Unmarshal(head.ID, &id) != nil || id <= 0 {
		return provider.Instance{}, fmt.Errorf("a row without a readable id (%s): %w", trimMsg(string(head.ID)), provider.ErrIncompleteListing)
	}
	q := provider.Instance{ID: id, ActualStatus: new(provider.StateUnknown), Quarantine: err.Error()}
	var label string
	if json.Unmarshal(head.Label, &label) == nil && label != "" {
		q.Label = &label
	}
	return q, nil
}

// noteQuarantine logs a quarantined row the first time this client sees it:
// a poll loop lists every few seconds and must not flood the log.
func (c *Client) noteQuarantine(ctx context.Context, in provider.Instance) {
	c.qmu.Lock()
	seen := c.quarantined[in.ID]
	if !seen {
		if c.quarantined == nil {
			c.quarantined = map[int64]bool{}
		}
		c.quarantined[in.ID] = true
	}
	c.qmu.Unlock()
	if !seen {
		c.log.WarnContext(ctx, "instance row quarantined: the client cannot read it; it stays listed as unknown",
			"instance", in.ID, "label", in.LabelText(), "error", c.redact(trimMsg(in.Quarantine)))
	}
}

// orderByID is the order_by the CLI sends, in Python's json.dumps spacing.
const orderByID = `[{"col": "id", "dir": "asc"}]`

// ListInstances fetches every page of the v1 listing. Any page failing, a
// repeated row, or a row count that differs from the last page's total
// fails the whole listing: callers act on absence, so a partial listing
// must never look complete. A total that changes between pages (rents
// landing meanwhile) is accepted only when the rows came in ascending id
// order, as the keyset asks: an instance created meanwhile has an id above
// the cursor and is on a later page, so the count at the end still proves
// that none was missed; out of order, it fails.
func (c *Client) ListInstances(ctx context.Context) (provider.Listing, error) {
	var (
		all     []provider.Instance
		total   = -1
		after   string
		seen    = map[int64]bool{}
		changed bool
		inOrder = true
		lastID  = int64(math.MinInt64)
		pages   int
	)
	for page := 1; ; page++ {
		pages = page
		if page > maxPages {
			return provider.Listing{}, fmt.Errorf("GET /api/v1/instances/: more than %d pages: %w", maxPages, provider.ErrIncompleteListing)
		}
		q := "limit=" + strconv.Itoa(pageSize) + "&order_by=" + url.QueryEscape(orderByID)
		if after != "" {
			q += "&after_token=" + url.QueryEscape(after)
		}
		cl := call{method: http.MethodGet, path: "/api/v1/instances/", query: q, policy: retryRead}
		resp, err := c.do(ctx, cl)
		if err != nil {
			return provider.Listing{}, fmt.Errorf("listing page %d: %w", page, err)
		}
		var p listPage
		if err := c.decode(cl, opOther, resp, &p); err != nil {
			return provider.Listing{}, fmt.Errorf("listing page %d: %w", page, err)
		}
		// The page is decoded already, success included: parse the body
		// again (a page is hundreds of rows) only to build the error.
		if p.Success != nil && !*p.Success {
			if err := c.checkSuccess(cl, opOther, resp); err != nil {
				return provider.Listing{}, fmt.Errorf("listing page %d: %w", page, err)
			}
		}
		if p.TotalInstances == nil {
			return provider.Listing{}, fmt.Errorf("listing page %d has no total_instances: %w", page, provider.ErrIncompleteListing)
		}
		if total >= 0 && *p.TotalInstances != total {
			if !inOrder {
				return provider.Listing{}, fmt.Errorf("listing total changed from %d to %d on page %d: %w",
					total, *p.TotalInstances, page, provider.ErrIncompleteListing)
			}
			changed = true
		}
		total = *p.TotalInstances
		for _, raw := range p.Instances {
			in, err := readRow(raw)
			if err != nil {
				return provider.Listing{}, fmt.Errorf("listing page %d: %w", page, err)
			}
			if in.Quarantined() {
				c.noteQuarantine(ctx, in)
			}
			if seen[in.ID] {
				return provider.Listing{}, fmt.Errorf("instance %d listed twice: %w", in.ID, provider.ErrIncompleteListing)
			}
			seen[in.ID] = true
			inOrder = inOrder && in.ID > lastID
			lastID = in.ID
			all = append(all, in)
		}
		if changed && !inOrder {
			return provider.Listing{}, fmt.Errorf("listing total changed to %d by page %d, rows out of id order: %w",
				total, page, provider.ErrIncompleteListing)
		}
		next := tokenText(p.NextToken)
		if next == "" {
			break
		}
		if next == after {
			return provider.Listing{}, fmt.Errorf("listing token repeated on page %d: %w", page, provider.ErrIncompleteListing)
		}
		after = next
	}
	if len(all) != total {
		return provider.Listing{}, fmt.Errorf("listing returned %d instances but the total is %d: %w",
			len(all), total, provider.ErrIncompleteListing)
	}
	return provider.Listing{Instances: all, Total: total, Pages: pages}, nil
}

// tokenText renders next_token, which may be a string or a number; "" when
// it is null or absent.
func tokenText(raw json.RawMessage) string { return vasterr.Text(bytes.TrimSpace(raw)) }

// ShowInstance is GET /api/v0/instances/{id}/?owner=me.
func (c *Client) ShowInstance(ctx context.Context, id int64) (provider.Instance, error) {
	cl := call{method: http.MethodGet, path: fmt.Sprintf("/api/v0/instances/%d/", id), query: "owner=me", policy: retryRead}
	resp, err := c.do(ctx, cl)
	if err != nil {
		return provider.Instance{}, err
	}
	var out struct {
		Instances json.RawMessage `json:"instances"`
	}
	if err := c.decode(cl, opInstance, resp, &out); err != nil {
		return provider.Instance{}, err
	}
	if err := c.checkSuccess(cl, opInstance, resp); err != nil {
		return provider.Instance{}, err
	}
	raw := bytes.TrimSpace(out.Instances)
	if len(raw) == 0 || string(raw) == "null" || string(raw) == "[]" {
		return provider.Instance{}, &provider.APIError{Method: cl.method, Path: cl.path, Status: resp.status,
			Msg: fmt.Sprintf("instance %d does not exist", id), Kind: provider.ErrNotFound}
	}
	if raw[0] == '[' { // older servers answered a one-row list
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil || len(list) != 1 {
			return provider.Instance{}, fmt.Errorf("%s %s: unexpected instances list: %v", cl.method, cl.path, err)
		}
		raw = list[0]
	}
	// An odd row is quarantined as in a listing: its id, "unknown".
	inst, err := readRow(raw)
	if err != nil {
		return provider.Instance{}, fmt.Errorf("%s %s: decode instance: %w", cl.method, cl.path, err)
	}
	if inst.Quarantined() {
		c.noteQuarantine(ctx, inst)
	}
	if inst.ID != id {
		return provider.Instance{}, fmt.Errorf("%s %s: answer is instance %d", cl.method, cl.path, inst.ID)
	}
	return inst, nil
}

// manage sends PUT /api/v0/instances/{id}/ with body.
func (c *Client) manage(ctx context.Context, id int64, body any) error {
	cl := call{method: http.MethodPut, path: fmt.Sprintf("/api/v0/instances/%d/", id), body: body, policy: retryWrite}
	return c.simple(ctx, cl)
}

// simple runs an instance call whose answer is {"success": ...}.
func (c *Client) simple(ctx context.Context, cl call) error {
	_, err := c.simpleSent(ctx, cl)
	return err
}

// simpleSent is simple, and when the request behind the answer was sent.
func (c *Client) simpleSent(ctx context.Context, cl call) (time.Time, error) {
	resp, err := c.do(ctx, cl)
	if err != nil {
		return time.Time{}, err
	}
	if err := c.decode(cl, opInstance, resp, nil); err != nil {
		return time.Time{}, err
	}
	return resp.sent, c.checkSuccess(cl, opInstance, resp)
}

// StartInstance asks a stopped instance to run.
func (c *Client) StartInstance(ctx context.Context, id int64) error {
	return c.manage(ctx, id, map[string]string{"state": "running"})
}

// StopInstance stops an instance; its storage keeps billing.
func (c *Client) StopInstance(ctx context.Context, id int64) error {
	_, err := c.StopInstanceSent(ctx, id)
	return err
}

// StopInstanceSent is StopInstance, and when its request was sent
// (provider.SentTimer).
func (c *Client) StopInstanceSent(ctx context.Context, id int64) (time.Time, error) {
	return c.simpleSent(ctx, call{method: http.MethodPut, path: fmt.Sprintf("/api/v0/instances/%d/", id),
		body: map[string]string{"state": "stopped"}, policy: retryWrite})
}

// ChangeBid is PUT /api/v0/instances/bid_price/{id}/ with the body the
// vastai CLI sends, {"client_id":"me","price":P}; a nil price is sent as
// null, which asks for a winning price.
func (c *Client) ChangeBid(ctx context.Context, id int64, price *float64) error {
	body := struct {
		ClientID string   `json:"client_id"`
		Price    *float64 `json:"price"`
	}{"me", price}
	return c.simple(ctx, call{method: http.MethodPut, path: fmt.Sprintf("/api/v0/instances/bid_price/%d/", id), body: body, policy: retryWrite})
}

// SetLabel relabels an instance.
func (c *Client) SetLabel(ctx context.Context, id int64, label string) error {
	return c.manage(ctx, id, map[string]string{"label": label})
}

// DestroyInstance is DELETE /api/v0/instances/{id}/ with body {}. A retry
// after a lost answer may see ErrNotFound, which callers treat as done.
func (c *Client) DestroyInstance(ctx context.Context, id int64) error {
	_, err := c.DestroyInstanceSent(ctx, id)
	return err
}

// DestroyInstanceSent is DestroyInstance, and when its request was sent
// (provider.SentTimer).
func (c *Client) DestroyInstanceSent(ctx context.Context, id int64) (time.Time, error) {
	return c.simpleSent(ctx, call{method: http.MethodDelete, path: fmt.Sprintf("/api/v0/instances/%d/", id), policy: retryWrite})
}

// RebootInstance restarts the container, keeping the GPU.
func (c *Client) RebootInstance(ctx context.Context, id int64) error {
	return c.simple(ctx, call{method: http.MethodPut, path: fmt.Sprintf("/api/v0/instances/reboot/%d/", id), policy: retryWrite})
}

// CurrentUser is GET /api/v0/users/current (no trailing slash).
func (c *Client) CurrentUser(ctx context.Context) (provider.User, error) {
	cl := call{method: http.MethodGet, path: "/api/v0/users/current", policy: retryRead}
	resp, err := c.do(ctx, cl)
	if err != nil {
		return provider.User{}, err
	}
	var u provider.User
	if err := c.decode(cl, opOther, resp, &u); err != nil {
		return provider.User{}, err
	}
	if err := c.checkSuccess(cl, opOther, resp); err != nil {
		return provider.User{}, err
	}
	return u, nil
}

// Log polling as the CLI does it: 30 tries, 0.3 s apart.
const (
	logPolls    = 30
	logInterval = 300 * time.Millisecond
)

// InstanceLogs asks for the container log and polls its result_url, which
// is fetched without the key (it is a pre-signed link, often elsewhere).
func (c *Client) InstanceLogs(ctx context.Context, id int64, tail int) (string, error) {
	body := map[string]string{}
	if tail > 0 {
		body["tail"] = strconv.Itoa(tail) // the CLI sends it as a string
	}
	cl := call{method: http.MethodPut, path: fmt.Sprintf("/api/v0/instances/request_logs/%d/", id), body: body, policy: retryWrite}
	resp, err := c.do(ctx, cl)
	if err != nil {
		return "", err
	}
	var out struct {
		ResultURL string `json:"result_url"`
		Msg       string `json:"msg"`
	}
	if err := c.decode(cl, opInstance, resp, &out); err != nil {
		return "", err
	}
	if err := c.checkSuccess(cl, opInstance, resp); err != nil {
		return "", err
	}
	if out.ResultURL == "" {
		return "", fmt.Errorf("%s %s: no result_url: %s", cl.method, cl.path, c.redact(trimMsg(out.Msg)))
	}
	u, err := url.Parse(out.ResultURL)
	if err == nil && !u.IsAbs() {
		u = c.base.ResolveReference(u)
	}
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%s %s: bad result_url", cl.method, cl.path)
	}
	get := call{method: http.MethodGet, path: u.Path, abs: u.String(), noAuth: true, policy: retryNone}
	var last error
	for i := 0; i < logPolls; i++ {
		if i > 0 {
			if err := c.clock.Sleep(ctx, logInterval); err != nil {
				return "", err
			}
		}
		r, err := c.do(ctx, get)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return "", err
			}
			last = err
		case r.status == http.StatusOK:
			return string(r.body), nil
		default:
			last = fmt.Errorf("GET %s: HTTP %d", u.Path, r.status)
		}
	}
	return "", fmt.Errorf("instance %d logs not ready after %d polls: %w", id, logPolls, errors.Join(last))
}

// SetStates starts or stops instances with PUT /api/v0/instances/ and
// {"state", "ids"}, provider.BulkChunk ids a call, as the vastai CLI's
// start/stop instances do. An answer {"success": false} names the ids it
// could not change in "failed"; without that list the whole chunk failed.
func (c *Client) SetStates(ctx context.Context, ids []int64, running bool) ([]int64, error) {
	state := "stopped"
	if running {
		state = "running"
	}
	var failed []int64
	for start := 0; start < len(ids); start += provider.BulkChunk {
		chunk := ids[start:min(start+provider.BulkChunk, len(ids))]
		cl := call{method: http.MethodPut, path: "/api/v0/instances/", body: map[string]any{"state": state, "ids": chunk}, policy: retryWrite}
		resp, err := c.do(ctx, cl)
		if err == nil {
			err = c.decode(cl, opInstance, resp, nil)
		}
		if err != nil {
			return append(failed, ids[start:]...), err
		}
		var ans struct {
			Success *bool   `json:"success"`
			Failed  []int64 `json:"failed"`
		}
		if json.Unmarshal(resp.body, &ans) == nil && ans.Success != nil && !*ans.Success {
			if ans.Failed == nil {
				return append(failed, ids[start:]...), c.checkSuccess(cl, opInstance, resp)
			}
			failed = append(failed, ans.Failed...)
		}
	}
	return failed, nil
}
