package sim

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
)

// reply is what a handler decided; the wrapper saves state before writing
// it, so a client never sees an answer whose effect could later be lost.
type reply struct {
	status int
	body   any    // JSON
	text   string // plain text when body is nil
	lost   bool   // drop the connection instead of answering
}

func jsonReply(status int, body any) reply { return reply{status: status, body: body} }

func errReply(err error) reply {
	if e, ok := err.(*apiError); ok {
		return jsonReply(e.Status, map[string]any{"success": false, "error": e.Code, "msg": e.Msg})
	}
	return jsonReply(500, map[string]any{"success": false, "error": "server_error", "msg": err.Error()})
}

func badArgs(format string, args ...any) reply {
	return errReply(&apiError{400, "invalid_args", fmt.Sprintf(format, args...)})
}

type apiHandler func(r *http.Request, body []byte, now time.Time) reply

// Handler serves the vast.ai API subset and the sim-only /sim/ surface.
func (m *Market) Handler() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, h apiHandler) { mux.Handle(pattern, m.wrap(h, true)) }
	open := func(pattern string, h apiHandler) { mux.Handle(pattern, m.wrap(h, false)) }

	api("POST /api/v0/bundles/{$}", m.hSearch(false))
	api("PUT /api/v0/search/asks/{$}", m.hSearch(true))
	api("PUT /api/v0/asks/{id}/{$}", m.hCreate)
	api("POST /api/v0/asks/bulk/{$}", m.hBulkCreate)
	api("GET /api/v1/instances/{$}", m.hList)
	api("GET /api/v0/instances/{id}/{$}", m.hShow)
	api("PUT /api/v0/instances/{id}/{$}", m.hManage)
	api("PUT /api/v0/instances/{$}", m.hBulkState)
	api("PUT /api/v0/instances/reboot/{id}/{$}", m.hReboot)
	api("PUT /api/v0/instances/recycle/{id}/{$}", m.hRecycle)
	api("PUT /api/v0/instances/update_template/{id}/{$}", m.hUpdateInstance)
	api("PUT /api/v0/launch_instance/{$}", m.hLaunch)
	api("GET /api/v0/template/{$}", m.hTemplates)
	api("PUT /api/v0/instances/bid_price/{id}/{$}", m.hChangeBid)
	api("DELETE /api/v0/instances/{id}/{$}", m.hDestroy)
	api("DELETE /api/v0/instances/{$}", m.hBulkDestroy)
	api("PUT /api/v0/instances/request_logs/{id}/{$}", m.hRequestLogs)
	api("PUT /api/v0/instances/command/{id}/{$}", m.hExecute)
	api("POST /api/v0/ssh/{$}", m.hCreateKey)
	api("GET /api/v0/ssh/{$}", m.hListKeys)
	api("PUT /api/v0/ssh/{key}/{$}", m.hUpdateKey)
	api("DELETE /api/v0/ssh/{key}/{$}", m.hDeleteKey)
	api("POST /api/v0/instances/{id}/ssh/{$}", m.hAttachKey)
	api("GET /api/v0/instances/{id}/ssh/{$}", m.hInstanceKeys)
	api("DELETE /api/v0/instances/{id}/ssh/{key}/{$}", m.hDetachKey)
	api("GET /api/v0/users/current", m.hUser)
	api("GET /api/v0/auth/apikeys/{$}", m.hListAPIKeys)
	api("POST /api/v0/auth/apikeys/{$}", m.hCreateAPIKey)
	api("GET /api/v0/auth/apikeys/{id}/{$}", m.hShowAPIKey)
	api("DELETE /api/v0/auth/apikeys/{id}/{$}", m.hDeleteAPIKey)
	api("PUT /api/v0/commands/rsync/{$}", m.hCopy)
	api("PUT /api/v0/commands/copy_direct/{$}", m.hCopy)
	api("DELETE /api/v0/commands/copy_direct/{$}", m.hCancelCopy)
	api("GET /api/v0/charges/{$}", m.hCharges)
	api("GET /api/v1/invoices/{$}", m.hInvoicesV1)
	api("GET /api/v0/invoices", m.hSearchInvoices)
	api("GET /api/v0/users/me/invoices", m.hUserInvoices)
	api("GET /api/v0/users/me/invoices/{$}", m.hUserInvoices)
	open("GET /api/v0/gpu_names/unique/{$}", m.hGPUNames)

	open("GET /sim/logs/{token}", m.hLogs)
	open("GET /sim/ledger", m.hLedger)
	open("GET /sim/state", m.hState)
	open("GET /sim/clock", m.hClock)
	open("POST /sim/advance", m.hAdvance)
	open("POST /sim/offline/{id}", m.hOffline)
	if sc, ok := m.cfg.Clock.(*clock.Shared); ok {
		m.sessionRoutes(mux, sc)
	}
	if m.cfg.Stop != nil {
		mux.HandleFunc("POST /sim/stop", func(w http.ResponseWriter, r *http.Request) {
			if !loopback(r.RemoteAddr) {
				http.Error(w, "sim admin is loopback-only", http.StatusForbidden)
				return
			}
			m.cfg.Stop()
			w.WriteHeader(http.StatusNoContent)
		})
	}
	return mux
}

func searchPath(p string) bool { return p == "/api/v0/bundles/" || p == "/api/v0/search/asks/" }

func (m *Market) wrap(h apiHandler, authed bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.lastRequest.Store(time.Now().UnixNano())
		sim := strings.HasPrefix(r.URL.Path, "/sim/")
		if sim && !loopback(r.RemoteAddr) {
			http.Error(w, "sim admin is loopback-only", http.StatusForbidden)
			return
		}
		limit := int64(maxBody)
		if authed {
			// The key first: a stranger's upload is never read, so it cannot
			// cost the server memory (20 parallel 4 MiB bodies did).
			m.mu.Lock()
			deny, n, ok := m.bodyAllowance(r)
			m.mu.Unlock()
			if !ok {
				writeReply(w, deny)
				return
			}
			limit = n
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, limit))
		if err != nil {
			writeReply(w, badArgs("reading body: %v", err))
			return
		}
		m.mu.Lock()
		if m.apiURL == "" && loopback(r.Host) {
			m.apiURL = "http://" + r.Host // served by someone else's listener (httptest)
		}
		if authed {
			if deny, ok := m.authorize(r, body); !ok {
				m.mu.Unlock()
				writeReply(w, deny)
				return
			}
		}
		now := m.cfg.Clock.Now()
		m.advance(now)
		// Machines first, so that the answer shows the ports they really
		// bound (a port taken meanwhile moves at boot); again after, for
		// what the request itself changed.
		m.syncHosts(now)
		var rep reply
		injected := false
		if authed {
			rep, injected = m.injectFault(r)
		}
		if !injected {
			rep = h(r, body, now)
			m.syncHosts(now)
		}
		// A search is a POST or PUT but changes nothing worth a save.
		mutating := (r.Method != http.MethodGet && !searchPath(r.URL.Path)) || injected
		var saveErr error
		if mutating && m.dir != "" {
			saveErr = m.saveLocked()
		}
		m.mu.Unlock()

		if saveErr != nil {
			writeReply(w, errReply(fmt.Errorf("saving sim state: %w", saveErr)))
			return
		}
		if rep.lost {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			// Cannot hijack (HTTP/2): the closest thing is a reset stream.
			panic(http.ErrAbortHandler)
		}
		if rep.status == http.StatusTooManyRequests && m.cfg.Faults.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(m.cfg.Faults.RetryAfter.Seconds()+0.5)))
		}
		writeReply(w, rep)
	})
}

// Body limits: an API call's whole body (an onstart script fits), and a
// call made with an instance's own key, which only ever sets a state.
const (
	maxBody         = 4 << 20
	maxInstanceBody = 64 << 10
)

// bodyAllowance is the check made before any of the body is read: it
// refuses an unknown key, and tells how much body a known one may send.
// authorize still checks the request in full once the body is in. m.mu is
// held.
func (m *Market) bodyAllowance(r *http.Request) (reply, int64, bool) {
	key := requestKey(r)
	if owner, ok := m.keyOwner[key]; ok && key != "" {
		if instanceScope(r, owner) {
			return reply{}, maxInstanceBody, true
		}
		deny, _ := m.authorize(r, nil)
		return deny, 0, false
	}
	if deny, ok := m.authorize(r, nil); !ok {
		return deny, 0, false
	}
	return reply{}, maxBody, true
}

// authorize checks the request's key: the account key, or an instance's
// own key (CONTAINER_API_KEY) within its scope. m.mu is held.
func (m *Market) authorize(r *http.Request, body []byte) (reply, bool) {
	key := requestKey(r)
	if owner, ok := m.keyOwner[key]; ok && key != "" {
		if instanceScope(r, owner) && (r.Method != http.MethodPut || stateOnly(body)) {
			return reply{}, true
		}
		return jsonReply(http.StatusForbidden, map[string]any{"success": false, "error": "not_authorized",
			"msg": fmt.Sprintf("This is instance %d's own key: it may only show, start, stop and destroy that instance.", owner)}), false
	}
	if k := m.apiKey(key); k != nil {
		return k.authorize(r)
	}
	if m.cfg.APIKey != "" && key != m.cfg.APIKey {
		status := http.StatusUnauthorized
		if m.cfg.Faults.AuthAs404 {
			status = http.StatusNotFound
		}
		return jsonReply(status, map[string]any{"success": false, "error": "auth_error", "msg": "Invalid user key"}), false
	}
	return reply{}, true
}

// injectFault draws this request's rate-limit or server fault. Lost
// creates are decided in the create handler, after the create applies.
func (m *Market) injectFault(r *http.Request) (reply, bool) {
	m.st.Requests++
	f := m.cfg.Faults
	u := draw(m.st.Seed, drawRequest, m.st.Requests, 0)
	followUp := r.URL.Path == "/api/v1/instances/" && r.URL.Query().Get("after_token") != ""
	if !followUp && !m.admit(requestKey(r), m.cfg.Clock.Now()) {
		return reply{status: http.StatusTooManyRequests, text: "API requests too frequent"}, true
	}
	if !followUp && !m.admitEndpoint(requestKey(r), r.Pattern, m.cfg.Clock.Now()) {
		return reply{status: http.StatusTooManyRequests, text: "API requests too frequent endpoint threshold=" + strconv.FormatFloat(endpointLimits[r.Pattern], 'g', 3, 64)}, true
	}
	if u < f.Rate429 && !followUp {
		return reply{status: http.StatusTooManyRequests, text: "API requests too frequent"}, true
	}
	if u >= f.Rate429 && u < f.Rate429+f.Rate5xx {
		if draw(m.st.Seed, draw5xx, m.st.Requests, 0) < 0.5 {
			return reply{status: http.StatusBadGateway, text: "<html><body><h1>502 Bad Gateway</h1></body></html>"}, true
		}
		return jsonReply(http.StatusInternalServerError, map[string]any{"success": false, "error": "server_error", "msg": "Internal server error"}), true
	}
	return reply{}, false
}

func (m *Market) lostCreate() bool {
	p := m.cfg.Faults.LostCreate
	return p > 0 && draw(m.st.Seed, drawRequest, m.st.Requests, 1) < p
}

func writeReply(w http.ResponseWriter, rep reply) {
	if rep.body == nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.text)
		return
	}
	b, err := json.Marshal(rep.body)
	if err != nil {
		rep.status, b = 500, []byte(`{"success":false,"error":"server_error","msg":"encoding"}`)
	}
	// Exactly application/json: the official CLI refuses anything else.
	w.Header().Set("Content-Type", "application/json")
	// The length up front: a client reads the answer into one buffer of
	// that size, and the body is not chunked.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(rep.status)
	w.Write(b)
}

func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func requestKey(r *http.Request) string {
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		return strings.TrimSpace(a[len("Bearer "):])
	}
	return r.URL.Query().Get("api_key")
}

func pathID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id, err == nil
}

// ---- search ----

func (m *Market) hSearch(wrapped bool) apiHandler {
	return func(r *http.Request, body []byte, now time.Time) reply {
		raw := body
		if wrapped {
			var w struct {
				Q json.RawMessage `json:"q"`
			}
			if err := json.Unmarshal(body, &w); err != nil || len(w.Q) == 0 {
				return badArgs("body must be {\"select_cols\":[...],\"q\":{...}}")
			}
			raw = w.Q
		}
		q, err := parseRequest(raw)
		if err != nil {
			return badArgs("%v", err)
		}
		limit := m.cfg.ResultCap
		if q.limit > 0 {
			limit = min(q.limit, MaxResultCap)
		}
		if m.cfg.AnswerCap > 0 {
			limit = min(limit, m.cfg.AnswerCap)
		}
		out := m.searchOffers(q, now, limit)
		if m.cfg.Faults.OddRows <= 0 {
			return jsonReply(200, map[string]any{"offers": out})
		}
		rows := make([]any, len(out))
		for i := range out {
			rows[i] = m.oddRow(out[i], out[i].ID, offerOddities)
		}
		return jsonReply(200, map[string]any{"offers": rows})
	}
}

// ---- create ----

func (m *Market) hCreate(r *http.Request, body []byte, now time.Time) reply {
	offerID, ok := pathID(r)
	if !ok {
		return errReply(&apiError{404, "no_such_ask", "Offer " + r.PathValue("id") + " does not exist."})
	}
	in, bad := createBody(body)
	if bad != nil {
		return *bad
	}
	inst, err := m.create(offerID, in, now)
	if err != nil {
		return errReply(err)
	}
	if m.lostCreate() {
		return reply{lost: true}
	}
	return jsonReply(200, map[string]any{"success": true, "new_contract": inst.ID, "instance_api_key": inst.APIKey})
}

// bulkCreateMax is the most offer ids one bulk create takes: the vastai
// CLI sends 64 a call.
const bulkCreateMax = 64

// hBulkCreate is POST /api/v0/asks/bulk/: the create body plus "ids". Each
// offer is rented on its own, so one that is gone does not stop the rest.
// vast does not document the answer; this one names each new contract by
// its offer and each refusal with its reason, and says success only when
// every offer was rented. A client must confirm by listing either way.
func (m *Market) hBulkCreate(_ *http.Request, body []byte, now time.Time) reply {
	var ids struct {
		IDs []int64 `json:"ids"`
	}
	if err := json.Unmarshal(body, &ids); err != nil {
		return badArgs("invalid body: %v", err)
	}
	if len(ids.IDs) == 0 || len(ids.IDs) > bulkCreateMax {
		return badArgs("ids: want 1 to %d offer ids, got %d", bulkCreateMax, len(ids.IDs))
	}
	in, bad := createBody(body)
	if bad != nil {
		return *bad
	}
	type result struct {
		AskID       int64  `json:"ask_id"`
		Success     bool   `json:"success"`
		NewContract int64  `json:"new_contract,omitempty"`
		Error       string `json:"error,omitempty"`
		Msg         string `json:"msg,omitempty"`
	}
	results := make([]result, 0, len(ids.IDs))
	all := true
	for _, id := range ids.IDs {
		inst, err := m.create(id, in, now)
		if err != nil {
			all = false
			e, ok := err.(*apiError)
			if !ok {
				e = &apiError{500, "server_error", err.Error()}
			}
			results = append(results, result{AskID: id, Error: e.Code, Msg: e.Msg})
			continue
		}
		results = append(results, result{AskID: id, Success: true, NewContract: inst.ID})
	}
	if m.lostCreate() {
		return reply{lost: true}
	}
	return jsonReply(200, map[string]any{"success": all, "results": results})
}

// createBody reads the create body that PUT /asks/ID/ and the bulk create
// share; bad is the reply to send when it is not valid.
func createBody(body []byte) (in createInput, bad *reply) {
	var req struct {
		Image   string          `json:"image"`
		Disk    *float64        `json:"disk"`
		Env     json.RawMessage `json:"env"`
		Onstart *string         `json:"onstart"`
		Runtype *string         `json:"runtype"`
		Label   *string         `json:"label"`
		Price   *float64        `json:"price"`
	}
	fail := func(r reply) (createInput, *reply) { return createInput{}, &r }
	if err := json.Unmarshal(body, &req); err != nil {
		return fail(badArgs("invalid body: %v", err))
	}
	if req.Image == "" {
		return fail(badArgs("image is required"))
	}
	if req.Label != nil && len(*req.Label) > MaxLabel {
		return fail(badArgs("label is longer than %d characters", MaxLabel))
	}
	if req.Price != nil && (*req.Price < 0.001 || *req.Price > 128) {
		return fail(errReply(&apiError{400, "invalid_price", "price must be between 0.001 and 128 $/h"}))
	}
	in = createInput{Image: req.Image, Disk: 8, Label: req.Label, Price: req.Price, Runtype: "ssh"}
	if err := in.override(req.Disk, req.Onstart, req.Runtype, req.Env); err != nil {
		return fail(badArgs("env: %v", err))
	}
	return in, nil
}

// override sets on in what a create body asks beyond in's defaults: a
// disk over 8 GB, an onstart, a runtype and the env; err is the env's.
func (in *createInput) override(disk *float64, onstart, runtype *string, env json.RawMessage) error {
	if disk != nil && *disk > 8 {
		in.Disk = *disk
	}
	if onstart != nil {
		in.Onstart = *onstart
	}
	if runtype != nil && *runtype != "" {
		in.Runtype = *runtype
	}
	e, err := parseEnv(env)
	if err != nil {
		return err
	}
	in.Env = e
	return nil
}

// parseEnv accepts the dict the CLI sends, or the Docker-flag string form.
func parseEnv(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var d map[string]string
	if err := json.Unmarshal(raw, &d); err == nil {
		return d, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("want an object of strings")
	}
	d = map[string]string{}
	f := strings.Fields(s)
	for i := 0; i < len(f); i++ {
		if f[i] == "-e" && i+1 < len(f) {
			k, v, _ := strings.Cut(f[i+1], "=")
			d[k] = strings.Trim(v, `"'`)
			i++
		}
	}
	return d, nil
}

// ---- listing ----

type listFilter struct {
	field, op string
	vals      []any
}

var listFields = map[string]bool{"id": true, "label": true, "actual_status": true, "intended_status": true, "gpu_name": true, "verification": true}

func (m *Market) hList(r *http.Request, _ []byte, now time.Time) reply {
	q := r.URL.Query()
	limit := 25
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return badArgs("limit must be an integer")
		}
		limit = n
	}
	if limit <= 0 {
		limit = 5
	}
	limit = min(limit, 25)
	after := int64(-1 << 62)
	if tok := q.Get("after_token"); tok != "" {
		id, ok := decodeToken(tok)
		if !ok {
			return errReply(&apiError{400, "invalid_token", "after_token is not valid"})
		}
		after = id
	}
	if s := q.Get("order_by"); s != "" {
		var ob []map[string]any
		if err := json.Unmarshal([]byte(s), &ob); err != nil {
			return badArgs("order_by must be a JSON list of {col, dir}")
		}
		// Rows always come in id order: the keyset is the id (documented
		// simplification; the CLI itself orders by id).
	}
	var filters []listFilter
	if s := q.Get("select_filters"); s != "" {
		var sf map[string]map[string]any
		if err := json.Unmarshal([]byte(s), &sf); err != nil {
			return badArgs("select_filters must be a JSON object of {op: value}")
		}
		for field, ops := range sf {
			if !listFields[field] {
				return badArgs("%s is not a valid search key", field)
			}
			for op, v := range ops {
				f := listFilter{field: field, op: op}
				switch op {
				case "eq", "neq":
					f.vals = []any{v}
				case "in", "notin":
					l, ok := v.([]any)
					if !ok {
						return badArgs("%s %s wants a list", field, op)
					}
					f.vals = l
				default:
					return badArgs("operator %q is not supported on %s", op, field)
				}
				filters = append(filters, f)
			}
		}
	}
	// Filter on the few columns a filter can name, then build full rows
	// for the page alone: a listing walked page by page costs one pass
	// over the instances per page, not one full row per instance.
	var kept []*instance
	for _, in := range m.st.Instances {
		if in.Destroyed {
			continue
		}
		if len(filters) > 0 {
			row := m.filterRow(in)
			if !matchAll(&row, filters) {
				continue
			}
		}
		kept = append(kept, in)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].ID < kept[j].ID })
	counts := map[string]int{}
	for _, in := range kept {
		if in.Label != nil {
			counts[*in.Label]++
		}
	}
	total := len(kept)
	start := sort.Search(len(kept), func(i int) bool { return kept[i].ID > after })
	rest := kept[start:]
	var next any
	if len(rest) > limit {
		rest = rest[:limit]
		next = encodeToken(rest[len(rest)-1].ID)
	}
	page := []any{}
	for _, in := range rest {
		page = append(page, m.oddRow(m.row(in, now), in.ID, instanceOddities))
	}
	return jsonReply(200, map[string]any{
		"success": true, "instances_found": len(page), "total_instances": total,
		"label_counts": counts, "next_token": next, "instances": page,
	})
}

func encodeToken(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("simv1:" + strconv.FormatInt(id, 10)))
}

func decodeToken(tok string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !strings.HasPrefix(string(b), "simv1:") {
		return 0, false
	}
	id, err := strconv.ParseInt(string(b[len("simv1:"):]), 10, 64)
	return id, err == nil
}

// filterRow is an instance's row with only the columns listFields names
// filled in, as row fills them.
func (m *Market) filterRow(in *instance) InstanceRow {
	o := &m.offers[m.byID[in.OfferID]]
	r := InstanceRow{ID: in.ID, Label: in.Label, IntendedStatus: in.Intended, GPUName: o.GPUName, Verification: o.Verification}
	if in.Status != "" {
		s := in.Status
		r.ActualStatus = &s
	}
	return r
}

func matchAll(row *InstanceRow, filters []listFilter) bool {
	for _, f := range filters {
		var have any
		switch f.field {
		case "id":
			have = float64(row.ID)
		case "label":
			if row.Label != nil {
				have = *row.Label
			}
		case "actual_status":
			if row.ActualStatus != nil {
				have = *row.ActualStatus
			}
		case "intended_status":
			have = row.IntendedStatus
		case "gpu_name":
			have = row.GPUName
		case "verification":
			have = row.Verification
		}
		hit := false
		for _, v := range f.vals {
			if sameValue(f.field, have, v) {
				hit = true
				break
			}
		}
		if hit != (f.op == "eq" || f.op == "in") {
			return false
		}
	}
	return true
}

// sameValue compares a row value with a filter value; ids may come as
// numbers or strings, and ” (or null) matches an unlabeled row.
func sameValue(field string, have, want any) bool {
	if field == "id" {
		switch w := want.(type) {
		case float64:
			return have == w
		case string:
			n, err := strconv.ParseFloat(w, 64)
			return err == nil && have == n
		}
		return false
	}
	if want == nil || want == "" {
		return have == nil || have == ""
	}
	return have == want
}

func (m *Market) hShow(r *http.Request, _ []byte, now time.Time) reply {
	id, ok := pathID(r)
	var in *instance
	if ok {
		in = m.find(id)
	}
	if in == nil {
		return jsonReply(200, map[string]any{"instances": nil})
	}
	return jsonReply(200, map[string]any{"instances": m.oddRow(m.row(in, now), in.ID, instanceOddities)})
}

// ---- manage ----

func okReply() reply { return jsonReply(200, map[string]any{"success": true}) }

func (m *Market) hManage(r *http.Request, body []byte, now time.Time) reply {
	id, ok := pathID(r)
	if !ok {
		return errReply(noInstance(0))
	}
	var req struct {
		State *string `json:"state"`
		Label *string `json:"label"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badArgs("invalid body: %v", err)
	}
	in := m.find(id)
	if in == nil {
		return errReply(noInstance(id))
	}
	if req.Label != nil {
		if len(*req.Label) > MaxRelabel {
			return badArgs("label is longer than %d characters", MaxRelabel)
		}
		l := *req.Label
		in.Label = &l
	}
	if req.State != nil {
		if err := m.setState(id, *req.State, now); err != nil {
			if e, ok := err.(*apiError); ok && e.Status == 400 {
				return jsonReply(200, map[string]any{"success": false, "error": e.Code, "msg": e.Msg})
			}
			return errReply(err)
		}
	}
	return okReply()
}

func (m *Market) hBulkState(r *http.Request, body []byte, now time.Time) reply {
	var req struct {
		State string  `json:"state"`
		IDs   []int64 `json:"ids"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badArgs("invalid body: %v", err)
	}
	var failed []int64
	for _, id := range req.IDs {
		if err := m.setState(id, req.State, now); err != nil {
			failed = append(failed, id)
		}
	}
	if len(failed) > 0 {
		return jsonReply(200, map[string]any{"success": false, "msg": fmt.Sprintf("failed for instances %v", failed), "failed": failed})
	}
	return okReply()
}

func (m *Market) hReboot(r *http.Request, _ []byte, now time.Time) reply {
	id, _ := pathID(r)
	if err := m.reboot(id, now); err != nil {
		if e, ok := err.(*apiError); ok && e.Status == 400 {
			return jsonReply(200, map[string]any{"success": false, "msg": e.Msg})
		}
		return errReply(err)
	}
	return okReply()
}

func (m *Market) hDestroy(r *http.Request, _ []byte, now time.Time) reply {
	id, _ := pathID(r)
	if err := m.destroy(id, now); err != nil {
		return errReply(err)
	}
	return okReply()
}

func (m *Market) hBulkDestroy(r *http.Request, body []byte, now time.Time) reply {
	var req struct {
		IDs []int64 `json:"instance_ids"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badArgs("invalid body: %v", err)
	}
	var missing []int64
	for _, id := range req.IDs {
		if m.destroy(id, now) != nil {
			missing = append(missing, id)
		}
	}
	// Undocumented upstream; the simulator reports what it could not find.
	return jsonReply(200, map[string]any{"success": true, "not_found": missing})
}

// ---- logs, user, gpu names ----

func (m *Market) hRequestLogs(r *http.Request, body []byte, now time.Time) reply {
	id, _ := pathID(r)
	in := m.find(id)
	if in == nil {
		return errReply(noInstance(id))
	}
	var req struct {
		Tail       string `json:"tail"`
		Filter     string `json:"filter"`
		DaemonLogs string `json:"daemon_logs"`
	}
	_ = json.Unmarshal(body, &req)
	var lines []string
	if m.hosts != nil && req.DaemonLogs != "true" {
		// The container log: what the onstart and the sessions printed.
		b, err := os.ReadFile(m.hosts.LogPath(id))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return errReply(err)
		}
		if t := strings.TrimSuffix(string(b), "\n"); t != "" {
			lines = strings.Split(t, "\n")
		}
		if req.Tail == "" {
			req.Tail = "1000" // the CLI's documented default
		}
	}
	if len(lines) == 0 {
		// The daemon's lines: what vast shows with daemon_logs, and what
		// a container that printed nothing yet (no onstart) still has,
		// its start, so that logs are never empty.
		for _, e := range in.Events {
			lines = append(lines, e.At.UTC().Format(time.RFC3339)+" "+e.Msg)
		}
		if in.Status == "running" {
			lines = append(lines, now.UTC().Format(time.RFC3339)+" running "+in.Image)
		}
	}
	if req.Filter != "" {
		kept := lines[:0:0]
		for _, l := range lines {
			if strings.Contains(l, req.Filter) {
				kept = append(kept, l)
			}
		}
		lines = kept
	}
	if n, err := strconv.Atoi(req.Tail); err == nil && n >= 0 && n < len(lines) {
		lines = lines[len(lines)-n:]
	}
	tok := fmt.Sprintf("%016x", splitmix(uint64(m.st.Seed)^uint64(m.st.Requests)<<20^uint64(id)))
	text := ""
	if len(lines) > 0 {
		text = strings.Join(lines, "\n") + "\n"
	}
	m.storeResult(tok, text)
	return jsonReply(200, map[string]any{"success": true, "result_url": "http://" + r.Host + "/sim/logs/" + tok})
}

func (m *Market) hLogs(r *http.Request, _ []byte, _ time.Time) reply {
	text, ok := m.st.Logs[r.PathValue("token")]
	if !ok {
		return reply{status: 404, text: "not found"}
	}
	return reply{status: 200, text: text}
}

// simUserID is the simulated account's id (users/current, and the
// user_id every charge carries).
const simUserID = 4242

func (m *Market) hUser(r *http.Request, _ []byte, _ time.Time) reply {
	b := m.st.Balance
	return jsonReply(200, map[string]any{
		"id": simUserID, "username": "sim", "fullname": "Simulated User", "email": "sim@example.invalid",
		"balance": b, "credit": b, "has_billing": true, "can_pay": true, "email_verified": true,
		"balance_threshold": 0, "balance_threshold_enabled": false, "ssh_key": "",
		// vast includes the key (the CLI pops it before printing): here the
		// one the request came with, which the caller holds already, so a
		// scoped key never learns the account's main key.
		"api_key": requestKey(r),
	})
}

func (m *Market) hGPUNames(r *http.Request, _ []byte, _ time.Time) reply {
	names := make([]string, 0, len(gpuProfiles))
	for _, g := range gpuProfiles {
		names = append(names, g.name)
	}
	// The CLI reads r.json()["gpu_names"].
	return jsonReply(200, map[string]any{"success": true, "gpu_names": names})
}

// ---- sim admin ----

func (m *Market) hLedger(r *http.Request, _ []byte, _ time.Time) reply {
	total := 0.0
	for _, e := range m.st.Ledger {
		total += e.Amount
	}
	l := m.st.Ledger
	if l == nil {
		l = []LedgerEntry{}
	}
	return jsonReply(200, map[string]any{"entries": l, "total": total, "balance": m.st.Balance})
}

func (m *Market) hState(r *http.Request, _ []byte, now time.Time) reply {
	return jsonReply(200, map[string]any{"now": now, "balance": m.st.Balance, "instances": m.stateLocked(), "creates_per_offer": m.st.Creates})
}

func (m *Market) hClock(r *http.Request, _ []byte, now time.Time) reply {
	_, manual := m.cfg.Clock.(*clock.Manual)
	scale := 0.0 // a manual clock moves only when told to
	if sc, ok := m.cfg.Clock.(*clock.Scaled); ok {
		scale = sc.Scale()
	}
	if sc, ok := m.cfg.Clock.(*clock.Shared); ok {
		// Between sessions the local market runs at its pace; while one is
		// open it moves only in jumps, which a reader sees on its next look.
		if sc.Sessions() == 0 {
			scale = sc.Pace()
		}
		return jsonReply(200, map[string]any{"now": now, "manual": false, "scale": scale, "shared": true, "sessions": sc.Sessions()})
	}
	return jsonReply(200, map[string]any{"now": now, "manual": manual, "scale": scale})
}

func (m *Market) hAdvance(r *http.Request, _ []byte, now time.Time) reply {
	mc, ok := m.cfg.Clock.(*clock.Manual)
	if !ok {
		return badArgs("the clock is not manual")
	}
	d, err := time.ParseDuration(r.URL.Query().Get("d"))
	if err != nil || d < 0 {
		return badArgs("d must be a non-negative duration like 10m")
	}
	mc.Advance(d)
	t := mc.Now()
	m.advance(t)
	m.syncHosts(t)
	return jsonReply(200, map[string]any{"now": t})
}

// hOffline takes a running instance's machine offline now, as the host
// offline fault does at its drawn time: its processes die without notice
// and its SSH port goes dark. Tests lose nodes mid-run with it.
func (m *Market) hOffline(r *http.Request, _ []byte, now time.Time) reply {
	id, ok := pathID(r)
	var in *instance
	if ok {
		in = m.find(id)
	}
	if in == nil || in.Destroyed {
		return errReply(noInstance(id))
	}
	if in.Status != "running" {
		return badArgs("instance %d is %s, not running", id, in.Status)
	}
	in.OfflineSet, in.OfflineAt = true, now
	m.advance(now)
	m.syncHosts(now)
	return okReply()
}
