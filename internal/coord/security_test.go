package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/wire"
)

func testFleetTokensAreStablePrivateAndHashed(t *testing.T, backend string) {
	ctx := context.Background()
	store := newTestStore(t, backend, false)
	db := store.open(t)
	a1, v1, err := db.FleetTokens(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	a2, v2, err := db.FleetTokens(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if a1 != a2 || v1 != v2 {
		t.Fatalf("second call made new tokens")
	}
	if a1 == v1 || len(a1) != 64 {
		t.Fatalf("agent %q viewer %q: want two distinct 64-hex tokens", a1, v1)
	}
	b1, _, err := db.FleetTokens(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if b1 == a1 {
		t.Fatal("two fleets share an agent token")
	}
	db.Close()

	db = store.open(t)
	defer db.Close()
	a3, v3, err := db.FleetTokens(ctx, "alpha")
	if err != nil || a3 != a1 || v3 != v1 {
		t.Fatalf("after reopen: %v, tokens changed=%v", err, a3 != a1 || v3 != v1)
	}
	private := []string{db.TokensPath()}
	if backend == sqliteBackend {
		private = append(private, store.where)
	}
	for _, p := range private {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", p, st.Mode().Perm())
		}
	}
	// The database holds hashes only.
	var plain int
	if err := db.db.QueryRowContext(t.Context(), `SELECT count(*) FROM fleets WHERE CAST(agent_token_hash AS TEXT) = ? OR CAST(viewer_token_hash AS TEXT) = ?`, a1, v1).Scan(&plain); err != nil {
		t.Fatal(err)
	}
	if plain != 0 {
		t.Fatal("a plain token is stored in the database")
	}
	// A lost tokens file cannot be recovered: new tokens, the old refused.
	if err := os.Remove(db.TokensPath()); err != nil {
		t.Fatal(err)
	}
	a4, _, err := db.FleetTokens(ctx, "alpha")
	if err != nil || a4 == a1 {
		t.Fatalf("after losing the file: err %v, same token %v", err, a4 == a1)
	}
	srv, err := New(Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, ok := srv.auth.lookup(ctx, a1); ok {
		t.Error("the replaced agent token is still accepted")
	}
	if e, ok := srv.auth.lookup(ctx, a4); !ok || e.fleet != "alpha" || e.role != roleBootstrap {
		t.Errorf("new token: %+v %v", e, ok)
	}
}

func TestRequestsAreRefusedWithClearErrors(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	otherAgent, otherViewer, err := r.db.FleetTokens(context.Background(), "beta")
	if err != nil {
		t.Fatal(err)
	}
	hb := heartbeat("alpha", "n1")
	n1 := r.node("n1")
	big := `{"fleet":"alpha","node":"n1","pad":"` + strings.Repeat("x", wire.MaxBody) + `"}`
	withNode := func(edit func(*wire.Heartbeat)) wire.Heartbeat {
		h := heartbeat("alpha", "n1")
		edit(&h)
		return h
	}
	cases := []struct {
		name         string
		method, path string
		token        string
		body         any
		want         int
	}{
		{"no token", "POST", wire.PathHeartbeat, "", hb, 401},
		{"unknown token", "POST", wire.PathHeartbeat, strings.Repeat("0", 64), hb, 401},
		{"viewer posts a heartbeat", "POST", wire.PathHeartbeat, r.viewer, hb, 403},
		{"viewer posts findings", "POST", wire.PathFindings, r.viewer, findings("alpha", "n1", "k"), 403},
		{"agent reads state", "GET", wire.PathState, r.agent, nil, 403},
		{"agent reads events", "GET", wire.PathEvents, r.agent, nil, 403},
		{"agent reads metrics", "GET", wire.PathMetrics, r.agent, nil, 403},
		{"viewer fetches the agent binary", "GET", wire.PathAgentBin, r.viewer, nil, 403},
		{"other fleet's agent token", "POST", wire.PathHeartbeat, otherAgent, hb, 403},
		{"other fleet's agent token, findings", "POST", wire.PathFindings, otherAgent, findings("alpha", "n1", "x"), 403},
		{"oversized body", "POST", wire.PathHeartbeat, n1, big, 413},
		{"malformed JSON", "POST", wire.PathHeartbeat, n1, `{"fleet":"alpha",`, 400},
		{"not an object", "POST", wire.PathHeartbeat, n1, `[1,2]`, 400},
		{"trailing data", "POST", wire.PathHeartbeat, n1, `{"fleet":"alpha","node":"n1"} {}`, 400},
		{"empty body", "POST", wire.PathHeartbeat, n1, ``, 400},
		{"another node's name", "POST", wire.PathHeartbeat, n1, withNode(func(h *wire.Heartbeat) { h.Node = "n2" }), 403},
		{"bootstrap token posts a heartbeat", "POST", wire.PathHeartbeat, r.agent, hb, 403},
		{"control character in node", "POST", wire.PathHeartbeat, n1, withNode(func(h *wire.Heartbeat) { h.Node = "n\x1b[31m" }), 400},
		{"negative CPU", "POST", wire.PathHeartbeat, n1, withNode(func(h *wire.Heartbeat) { h.CPUPercent = -1 }), 400},
		{"negative RAM", "POST", wire.PathHeartbeat, n1, withNode(func(h *wire.Heartbeat) { h.RAMUsedBytes = -5 }), 400},
		{"GPU over 100 %", "POST", wire.PathHeartbeat, n1, withNode(func(h *wire.Heartbeat) { h.GPUs = []wire.GPU{{UtilPercent: 101}} }), 400},
		{"long metric name", "POST", wire.PathHeartbeat, n1, withNode(func(h *wire.Heartbeat) { h.Metrics = map[string]float64{strings.Repeat("m", 65): 1} }), 400},
		{"finding without key", "POST", wire.PathFindings, n1, findings("alpha", "n1", ""), 400},
		{"finding without data", "POST", wire.PathFindings, n1, `{"fleet":"alpha","node":"n1","items":[{"key":"k1","data":null}]}`, 400},
		{"no findings", "POST", wire.PathFindings, n1, `{"fleet":"alpha","node":"n1","items":[]}`, 400},
		{"wrong content type", "POST", wire.PathHeartbeat, n1, "text", 415},
		{"unknown path", "GET", "/api/v1/nothing", r.viewer, nil, 404},
		{"wrong method", "GET", wire.PathHeartbeat, n1, nil, 405},
		{"post to the dashboard", "POST", "/", r.viewer, `{}`, 405},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e wire.Error
			req := c.body
			code, _ := func() (int, http.Header) {
				if c.name == "wrong content type" {
					return r.doContentType(c.method, c.path, c.token, "text/plain", []byte(`{}`), &e)
				}
				return r.do(c.method, c.path, c.token, req, &e)
			}()
			if code != c.want {
				t.Fatalf("status %d, want %d (error %q)", code, c.want, e.Error)
			}
			if e.Error == "" {
				t.Error("no error message in the body")
			}
		})
	}
	// Each bad body is counted against the node whose credential sent it.
	m := r.metrics()
	for _, want := range []string{
		`vastfleet_bad_requests_total{fleet="alpha",node="n1",reason="malformed"} 5`,
		`vastfleet_bad_requests_total{fleet="alpha",node="n1",reason="oversized"} 1`,
		`vastfleet_bad_requests_total{fleet="alpha",node="n1",reason="invalid"} 8`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "vastfleet_bad_requests_total"))
		}
	}
	// Nothing of the refused requests reached any fleet.
	if rows, _ := countRows(t, r.db, "alpha"); rows != 0 {
		t.Errorf("%d findings stored from refused requests", rows)
	}
	for _, v := range []string{r.viewer, otherViewer} {
		var snap wire.Snapshot
		if code, _ := r.do("GET", wire.PathState, v, nil, &snap); code != 200 {
			t.Fatalf("state: %d", code)
		}
		if len(snap.Nodes) != 0 {
			t.Errorf("a refused heartbeat made a node: %+v", snap.Nodes)
		}
	}
}

func (r *rig) doContentType(method, path, token, ct string, body []byte, out *wire.Error) (int, http.Header) {
	req, _ := http.NewRequest(method, r.http.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", ct)
	resp, err := r.http.Client().Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		r.t.Errorf("decoding the error: %v", err)
	}
	return resp.StatusCode, resp.Header
}

// countingBody records whether the handler read it at all.
type countingBody struct{ read int }

func (c *countingBody) Read(p []byte) (int, error) {
	c.read += len(p)
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}
func (c *countingBody) Close() error { return nil }

func TestTokenIsCheckedBeforeTheBodyIsRead(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	for _, tok := range []string{"", "nope", r.viewer} {
		body := &countingBody{}
		req := httptest.NewRequest("POST", wire.PathFindings, nil)
		req.Body = body
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		rec := httptest.NewRecorder()
		r.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != 401 && rec.Code != 403 {
			t.Errorf("token %q: status %d", tok, rec.Code)
		}
		if body.read != 0 {
			t.Errorf("token %q: %d body bytes read before refusing", tok, body.read)
		}
	}
	// An endless body with a good token stops at the limit.
	body := &countingBody{}
	req := httptest.NewRequest("POST", wire.PathHeartbeat, nil)
	req.Body = body
	req.Header.Set("Authorization", "Bearer "+r.node("n1"))
	rec := httptest.NewRecorder()
	r.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != 413 && rec.Code != 400 {
		t.Errorf("endless body: status %d", rec.Code)
	}
	if body.read > 2*wire.MaxBody {
		t.Errorf("read %d bytes of an endless body", body.read)
	}
}

func TestRateLimitPerToken(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.TokenRate = 0.001; c.TokenBurst = 2 })
	hb := heartbeat("alpha", "n1")
	n1 := r.node("n1")
	for i := range 2 {
		if code, _ := r.do("POST", wire.PathHeartbeat, n1, hb, nil); code != 200 {
			t.Fatalf("request %d: %d", i, code)
		}
	}
	var e wire.Error
	code, h := r.do("POST", wire.PathHeartbeat, n1, hb, &e)
	if code != 429 {
		t.Fatalf("third request: %d, want 429", code)
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q", h.Get("Retry-After"))
	}
	if e.Error == "" {
		t.Error("no error message")
	}
	// The viewer token has its own bucket.
	if code, _ := r.do("GET", wire.PathState, r.viewer, nil, nil); code != 200 {
		t.Errorf("viewer after the agent's limit: %d", code)
	}
}

func testReplayedFindingsAreAckedAgainAndStoredOnce(t *testing.T, backend string) {
	r := newRigOn(t, backend, nil)
	var ack wire.FindingsAck
	if code, _ := r.do("POST", wire.PathFindings, r.node("n1"), findings("alpha", "n1", "a", "b", "b"), &ack); code != 200 {
		t.Fatalf("first batch: %d", code)
	}
	if ack.Stored != 2 || ack.Duplicates != 1 || strings.Join(ack.Acked, ",") != "a,b,b" {
		t.Fatalf("first ack %+v", ack)
	}
	ack = wire.FindingsAck{}
	if code, _ := r.do("POST", wire.PathFindings, r.node("n2"), findings("alpha", "n2", "a", "b", "c"), &ack); code != 200 {
		t.Fatalf("replay: %d", code)
	}
	if ack.Stored != 1 || ack.Duplicates != 2 || strings.Join(ack.Acked, ",") != "a,b,c" {
		t.Fatalf("replay ack %+v", ack)
	}
	rows, distinct := countRows(t, r.db, "alpha")
	if rows != 3 || distinct != 3 {
		t.Fatalf("stored %d rows (%d distinct), want 3", rows, distinct)
	}
	// The first copy wins: a replay from another node does not rewrite it.
	fs, err := r.db.Findings(context.Background(), "alpha", 0)
	if err != nil {
		t.Fatal(err)
	}
	if fs[0].Key != "a" || fs[0].Node != "n1" || fs[2].Key != "c" || fs[2].Node != "n2" {
		t.Fatalf("stored %+v", fs)
	}
	var snap wire.Snapshot
	r.do("GET", wire.PathState, r.viewer, nil, &snap)
	if snap.Totals.Findings != 3 || len(snap.Findings) != 3 || snap.Findings[0].Key != "c" {
		t.Fatalf("snapshot findings: total %d, list %+v", snap.Totals.Findings, snap.Findings)
	}
}
