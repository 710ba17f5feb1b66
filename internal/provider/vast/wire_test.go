package vast

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/vastfleet/vastfleet/internal/clock"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
)

const testKey = "sekrit-0123456789abcdef"

// seen is one request as the server received it.
type seen struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   string
}

// stub is a scripted server: each handler answers one request in turn
// (the last one repeats), and every request is recorded.
type stub struct {
	mu   sync.Mutex
	reqs []seen
	h    []http.HandlerFunc
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(b)})
	h := s.h[min(n, len(s.h)-1)]
	s.mu.Unlock()
	h(w, r)
}

func (s *stub) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

func answer(status int, ctype, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func jsonAnswer(status int, body string) http.HandlerFunc {
	return answer(status, "application/json", body)
}

// waits records the client's backoff sleeps instead of sleeping.
// waits is the client's clock in these tests: it records each wait and
// returns at once; it reads wall time unless at is set.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
	at time.Time
}

func (w *waits) Now() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at.IsZero() {
		return time.Now()
	}
	return w.at
}

func (w *waits) Sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

// newStub starts a scripted server and a client for it whose log goes to
// logBuf.
func newStub(t *testing.T, handlers ...http.HandlerFunc) (*Client, *stub, *waits, *bytes.Buffer) {
	t.Helper()
	s := &stub{h: handlers}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	w := &waits{}
	var logBuf bytes.Buffer
	c, err := New(Options{
		BaseURL: srv.URL, APIKey: testKey, Clock: w,
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logBuf}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Rand:   func() float64 { return 0.5 },
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, s, w, &logBuf
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestWireFormat(t *testing.T) {
	ctx := context.Background()
	c, s, _, _ := newStub(t,
		jsonAnswer(200, `{"offers":[{"id":7,"dph_total":0.1}]}`),
		jsonAnswer(200, `{"success":true,"new_contract":99,"instance_api_key":"ik"}`),
		jsonAnswer(200, `{"instances":{"id":99,"label":"x","ports":null}}`),
		jsonAnswer(200, `{"success":true}`),
		jsonAnswer(200, `{"success":true}`),
		jsonAnswer(200, `{"success":true}`),
		jsonAnswer(200, `{"success":true}`),
		jsonAnswer(200, `{"success":true}`),
		jsonAnswer(200, `{"id":5,"balance":12.5,"credit":1,"api_key":"should-not-matter"}`),
		jsonAnswer(200, `{"offers":[{"id":8,"dph_total":0.05}]}`),
	)
	q := market.Query{Filters: map[string]map[string]any{"num_gpus": {"eq": "2"}}, Order: [][2]string{{"score", "desc"}}, Type: "on-demand", AllocatedStorage: 5}
	if offers, err := c.SearchOffers(ctx, q); err != nil || len(offers) != 1 || offers[0].ID != 7 {
		t.Fatalf("search: %v %v", offers, err)
	}
	price := 0.25
	cr, err := c.CreateInstance(ctx, 1234, provider.CreateRequest{Image: "img", Disk: 12, Label: "lab", Price: &price, Env: map[string]string{"A": "b"}})
	if err != nil || cr.NewContract != 99 || cr.InstanceAPIKey != "ik" {
		t.Fatalf("create: %+v %v", cr, err)
	}
	if in, err := c.ShowInstance(ctx, 99); err != nil || in.LabelText() != "x" {
		t.Fatalf("show: %+v %v", in, err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.StopInstance(ctx, 99))
	must(c.StartInstance(ctx, 99))
	must(c.SetLabel(ctx, 99, "new"))
	must(c.RebootInstance(ctx, 99))
	must(c.DestroyInstance(ctx, 99))
	u, err := c.CurrentUser(ctx)
	if err != nil || u.ID != 5 || u.Balance != 12.5 {
		t.Fatalf("user: %+v %v", u, err)
	}
	q.Type = "bid"
	if offers, err := c.SearchOffersNew(ctx, q); err != nil || len(offers) != 1 || offers[0].ID != 8 {
		t.Fatalf("search --new: %v %v", offers, err)
	}

	want := []struct{ method, path, query, body string }{
		{"POST", "/api/v0/bundles/", "", `{"allocated_storage":5,"num_gpus":{"eq":"2"},"order":[["score","desc"]],"type":"on-demand"}`},
		{"PUT", "/api/v0/asks/1234/", "", ""},
		{"GET", "/api/v0/instances/99/", "owner=me", ""},
		{"PUT", "/api/v0/instances/99/", "", `{"state":"stopped"}`},
		{"PUT", "/api/v0/instances/99/", "", `{"state":"running"}`},
		{"PUT", "/api/v0/instances/99/", "", `{"label":"new"}`},
		{"PUT", "/api/v0/instances/reboot/99/", "", `{}`},
		{"DELETE", "/api/v0/instances/99/", "", `{}`},
		{"GET", "/api/v0/users/current", "", ""},
		// vastai search offers --new -b 'num_gpus=2'
		{"PUT", "/api/v0/search/asks/", "", `{"select_cols":["*"],"q":{"allocated_storage":5,"num_gpus":{"eq":"2"},"order":[["score","desc"]],"type":"bid"}}`},
	}
	got := s.requests()
	if len(got) != len(want) {
		t.Fatalf("%d requests, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Method != w.method || g.Path != w.path || g.RawQuery != w.query {
			t.Errorf("request %d: %s %s?%s, want %s %s?%s", i, g.Method, g.Path, g.RawQuery, w.method, w.path, w.query)
		}
		if w.body != "" && g.Body != w.body {
			t.Errorf("request %d body %s, want %s", i, g.Body, w.body)
		}
		if g.Method == "GET" && g.Body != "" {
			t.Errorf("request %d: GET with a body", i)
		}
		if g.Method != "GET" && g.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %d: content type %q", i, g.Header.Get("Content-Type"))
		}
		if a := g.Header.Get("Authorization"); a != "Bearer "+testKey {
			t.Errorf("request %d: Authorization %q", i, a)
		}
		if strings.Contains(g.RawQuery, testKey) || strings.Contains(g.RawQuery, "api_key") {
			t.Errorf("request %d: key in the URL", i)
		}
		if !strings.HasPrefix(g.Header.Get("User-Agent"), "vastfleet/") {
			t.Errorf("request %d: User-Agent %q", i, g.Header.Get("User-Agent"))
		}
	}
	var create map[string]any
	if err := json.Unmarshal([]byte(got[1].Body), &create); err != nil {
		t.Fatal(err)
	}
	wantCreate := map[string]any{
		"client_id": "me", "image": "img", "env": map[string]any{"A": "b"}, "price": 0.25, "disk": 12.0,
		"label": "lab", "onstart": nil, "runtype": "ssh", "extra": nil, "image_login": nil,
		"jupyter_dir": nil, "template_hash_id": nil, "user": nil, "python_utf8": false, "lang_utf8": false,
		"use_jupyter_lab": false, "force": false, "cancel_unavail": true,
	}
	for k, v := range wantCreate {
		gv, ok := create[k]
		if !ok {
			t.Errorf("create body lacks %q", k)
			continue
		}
		gj, _ := json.Marshal(gv)
		wj, _ := json.Marshal(v)
		if !bytes.Equal(gj, wj) {
			t.Errorf("create %q = %s, want %s", k, gj, wj)
		}
	}
	// On demand: price must be present and null.
	if _, err := c.CreateInstance(ctx, 1, provider.CreateRequest{Image: "img", Disk: 10}); err == nil {
		t.Fatal("create against a non-create answer succeeded")
	}
	last := s.requests()[len(s.requests())-1]
	if !strings.Contains(last.Body, `"price":null`) || !strings.Contains(last.Body, `"env":{}`) {
		t.Errorf("on-demand create body %s", last.Body)
	}
}

func TestErrorClassification(t *testing.T) {
	tests := []struct {
		name   string
		h      http.HandlerFunc
		call   func(*Client) error
		want   error
		msg    string // must appear in the error text
		status int
	}{
		{"destroy missing", jsonAnswer(404, `{"success":false,"error":"no_such_instance","msg":"Instance 5 not found."}`), destroy5, provider.ErrNotFound, "Instance 5 not found.", 404},
		{"404 auth_error is auth", jsonAnswer(404, `{"success":false,"error":"auth_error","msg":"Invalid user key"}`), destroy5, provider.ErrAuth, "Invalid user key", 404},
		{"404 session expired is auth", jsonAnswer(404, `{"success":false,"msg":"Session expired. Please log in again."}`), show5, provider.ErrAuth, "Session expired", 404},
		{"401", answer(401, "text/plain", "Unauthorized"), show5, provider.ErrAuth, "Unauthorized", 401},
		{"403", jsonAnswer(403, `{"error":"forbidden","msg":"key lacks instance_write"}`), destroy5, provider.ErrAuth, "instance_write", 403},
		{"show null", jsonAnswer(200, `{"instances":null}`), show5, provider.ErrNotFound, "", 200},
		{"create gone 404", jsonAnswer(404, `{"success":false,"error":"no_such_ask","msg":"Instance type no longer available."}`), create5, provider.ErrOfferGone, "no longer available", 404},
		{"create gone 410", jsonAnswer(410, `{"success":false,"error":"no_such_ask","msg":"unavailable"}`), create5, provider.ErrOfferGone, "unavailable", 410},
		{"create broke", jsonAnswer(400, `{"success":false,"error":"insufficient_credit","msg":"Your account lacks credit"}`), create5, provider.ErrInsufficientBalance, "lacks credit", 400},
		{"create 402 balance", jsonAnswer(402, `{"msg":"Insufficient balance"}`), create5, provider.ErrInsufficientBalance, "Insufficient balance", 402},
		{"stop success false", jsonAnswer(200, `{"success":false,"msg":"cannot stop now"}`), stop5, nil, "cannot stop now", 200},
		{"plain text 400", answer(400, "text/html", "<html>bad gateway thing</html>"), show5, nil, "bad gateway thing", 400},
		{"detail message", jsonAnswer(400, `{"detail":"API requests too weird"}`), show5, nil, "too weird", 400},
		{"message field", jsonAnswer(400, `{"message":"odd field"}`), show5, nil, "odd field", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, _, _ := newStub(t, tt.h)
			err := tt.call(c)
			if err == nil {
				t.Fatal("no error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if tt.want != provider.ErrNotFound && errors.Is(err, provider.ErrNotFound) {
				t.Errorf("err = %v classified as not found", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err %q lacks %q", err, tt.msg)
			}
			var ae *provider.APIError
			if !errors.As(err, &ae) || ae.Status != tt.status {
				t.Errorf("APIError status: %v", err)
			}
		})
	}
}

func destroy5(c *Client) error { return c.DestroyInstance(context.Background(), 5) }
func stop5(c *Client) error    { return c.StopInstance(context.Background(), 5) }
func show5(c *Client) error {
	_, err := c.ShowInstance(context.Background(), 5)
	return err
}
func create5(c *Client) error {
	_, err := c.CreateInstance(context.Background(), 5, provider.CreateRequest{Image: "i", Disk: 10})
	return err
}

func TestLongPlainTextBodyIsTrimmed(t *testing.T) {
	c, _, _, _ := newStub(t, answer(400, "text/plain", strings.Repeat("x", 5000)))
	err := show5(c)
	if err == nil || len(err.Error()) > 500 {
		t.Fatalf("error of %d chars", len(err.Error()))
	}
}

func TestSearchRejectsNonJSON(t *testing.T) {
	c, _, _, _ := newStub(t, answer(200, "text/html", "<html>login</html>"))
	_, err := c.SearchOffers(context.Background(), market.Query{})
	if err == nil || !strings.Contains(err.Error(), "not application/json") {
		t.Fatalf("err = %v", err)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	date := answer(429, "text/plain", "slow down")
	c, s, w, _ := newStub(t,
		func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Retry-After", "3")
			answer(429, "text/plain", "API requests too frequent")(rw, r)
		},
		func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Retry-After", now.Add(7*time.Second).Format(http.TimeFormat))
			date(rw, r)
		},
		jsonAnswer(200, `{"id":1}`),
	)
	w.mu.Lock()
	w.at = now
	w.mu.Unlock()
	if _, err := c.CurrentUser(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := w.all(); len(got) != 2 || got[0] != 3*time.Second || got[1] != 7*time.Second {
		t.Fatalf("waits %v, want [3s 7s]", got)
	}
	if n := len(s.requests()); n != 3 {
		t.Fatalf("%d requests", n)
	}
}

func TestBackoffWithoutRetryAfter(t *testing.T) {
	c, s, w, _ := newStub(t, answer(429, "text/plain", "API requests too frequent endpoint threshold=1.0"))
	err := show5(c)
	if !errors.Is(err, provider.ErrRateLimited) || !provider.Classify(err).Transient {
		t.Fatalf("err = %v", err)
	}
	if n := len(s.requests()); n != 8 {
		t.Fatalf("%d attempts, want 8", n)
	}
	// Rand is fixed at 0.5: half of 1s, 2s, 4s, 8s, 16s, then the 20s cap.
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	got := w.all()
	if len(got) != len(want) {
		t.Fatalf("waits %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
}

func TestBackoffIsJitteredAndCapped(t *testing.T) {
	c, err := New(Options{BaseURL: "http://127.0.0.1:1", MaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[time.Duration]bool{}
	for i := 0; i < 200; i++ {
		d := c.backoff(10, 0)
		if d < 0 || d > time.Second {
			t.Fatalf("backoff %v outside [0, 1s]", d)
		}
		distinct[d] = true
	}
	if len(distinct) < 50 {
		t.Fatalf("only %d distinct waits: not jittered", len(distinct))
	}
}

func TestServerErrorsRetriedForReadsOnly(t *testing.T) {
	c, s, _, _ := newStub(t, answer(500, "text/plain", "Internal Server Error"), jsonAnswer(200, `{"id":3}`))
	if u, err := c.CurrentUser(context.Background()); err != nil || u.ID != 3 {
		t.Fatalf("GET after a 500: %v", err)
	}
	if n := len(s.requests()); n != 2 {
		t.Fatalf("%d requests", n)
	}

	c, s, _, _ = newStub(t, answer(500, "text/plain", "Internal Server Error"))
	err := stop5(c)
	if !errors.Is(err, provider.ErrServer) || len(s.requests()) != 1 {
		t.Fatalf("stop after 500: %v, %d requests", err, len(s.requests()))
	}
	c, s, _, _ = newStub(t, answer(503, "text/plain", "unavailable"), jsonAnswer(200, `{"success":true}`))
	if err := destroy5(c); err != nil || len(s.requests()) != 2 {
		t.Fatalf("destroy after 503: %v, %d requests", err, len(s.requests()))
	}
}

func TestCreateNeverRetriedWhenOutcomeUnknown(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request) {
		// Hijack and drop the connection: the answer is lost.
		hj, _ := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		conn.Close()
	}
	for name, h := range map[string]http.HandlerFunc{
		"502":             answer(502, "text/html", "Bad Gateway"),
		"500":             jsonAnswer(500, `{"error":"server_error"}`),
		"connection lost": hang,
		"garbled 200":     answer(200, "application/json", `{"success":tr`),
	} {
		t.Run(name, func(t *testing.T) {
			c, s, _, _ := newStub(t, h)
			err := create5(c)
			if !errors.Is(err, provider.ErrMaybeCreated) {
				t.Fatalf("err = %v, want ErrMaybeCreated", err)
			}
			if provider.Classify(err).Transient {
				t.Error("a maybe-created error must not look transient")
			}
			if n := len(s.requests()); n != 1 {
				t.Fatalf("create sent %d times", n)
			}
		})
	}
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		c, s, _, _ := newStub(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		defer close(release)
		c.timeout = 50 * time.Millisecond
		err := create5(c)
		if !errors.Is(err, provider.ErrMaybeCreated) || len(s.requests()) != 1 {
			t.Fatalf("err = %v after %d requests", err, len(s.requests()))
		}
	})
	t.Run("429 is retried", func(t *testing.T) {
		c, s, _, _ := newStub(t, answer(429, "text/plain", "API requests too frequent"), jsonAnswer(200, `{"success":true,"new_contract":8}`))
		cr, err := c.CreateInstance(context.Background(), 5, provider.CreateRequest{Image: "i", Disk: 10})
		if err != nil || cr.NewContract != 8 || len(s.requests()) != 2 {
			t.Fatalf("create after 429: %+v %v (%d requests)", cr, err, len(s.requests()))
		}
	})
	t.Run("cancelled before sending", func(t *testing.T) {
		c, s, _, _ := newStub(t, jsonAnswer(200, `{}`))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := c.CreateInstance(ctx, 5, provider.CreateRequest{})
		if !errors.Is(err, context.Canceled) || errors.Is(err, provider.ErrMaybeCreated) || len(s.requests()) != 0 {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestNoRetryAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c, s, _, _ := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		cancel()
		answer(503, "text/plain", "busy")(w, r)
	})
	c.clock = clock.Wall{}
	_, err := c.CurrentUser(ctx)
	if !errors.Is(err, context.Canceled) || len(s.requests()) != 1 {
		t.Fatalf("err = %v after %d requests", err, len(s.requests()))
	}
}

func listPageBody(ids []int64, total int, next string) string {
	rows := make([]map[string]any, len(ids))
	for i, id := range ids {
		rows[i] = map[string]any{"id": id, "label": "l", "actual_status": "running", "extra_env": [][]string{}}
	}
	m := map[string]any{"success": true, "total_instances": total, "instances_found": len(ids), "instances": rows, "next_token": nil}
	if next != "" {
		m["next_token"] = next
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestListingPagination(t *testing.T) {
	ids := func(from, n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(from + i)
		}
		return out
	}
	t.Run("complete", func(t *testing.T) {
		c, s, _, _ := newStub(t, jsonAnswer(200, listPageBody(ids(1, 25), 30, "tok1")), jsonAnswer(200, listPageBody(ids(26, 5), 30, "")))
		l, err := c.ListInstances(context.Background())
		if err != nil || len(l.Instances) != 30 || l.Total != 30 {
			t.Fatalf("listing: %d rows, total %d, %v", len(l.Instances), l.Total, err)
		}
		r := s.requests()
		if r[0].Path != "/api/v1/instances/" || r[0].RawQuery != `limit=25&order_by=%5B%7B%22col%22%3A+%22id%22%2C+%22dir%22%3A+%22asc%22%7D%5D` {
			t.Errorf("first page %s?%s", r[0].Path, r[0].RawQuery)
		}
		if !strings.HasSuffix(r[1].RawQuery, "&after_token=tok1") {
			t.Errorf("second page query %s", r[1].RawQuery)
		}
	})
	// Rents landing between pages: a created instance has an id above the
	// cursor and comes on a later page, so a listing whose total grew is
	// complete when every row is there in id order.
	t.Run("grew while listed", func(t *testing.T) {
		c, _, _, _ := newStub(t, jsonAnswer(200, listPageBody(ids(1, 25), 30, "tok1")), jsonAnswer(200, listPageBody(ids(26, 6), 31, "")))
		l, err := c.ListInstances(context.Background())
		if err != nil || len(l.Instances) != 31 || l.Total != 31 {
			t.Fatalf("listing: %d rows, total %d, %v", len(l.Instances), l.Total, err)
		}
	})
	cases := map[string][]http.HandlerFunc{
		// Grew, but the new row is missing (or another was missed).
		"grew, a row short": {jsonAnswer(200, listPageBody(ids(1, 25), 30, "tok1")), jsonAnswer(200, listPageBody(ids(26, 5), 31, ""))},
		// Grew, with rows out of id order: the keyset proves nothing.
		"grew, out of order": {jsonAnswer(200, listPageBody(ids(1, 25), 30, "tok1")), jsonAnswer(200, listPageBody(append(ids(27, 5), 26), 31, ""))},
		// Shrank: a row seen is gone now, and the count cannot tell.
		"shrank":            {jsonAnswer(200, listPageBody(ids(1, 25), 30, "tok1")), jsonAnswer(200, listPageBody(ids(26, 5), 29, ""))},
		"second page fails": {jsonAnswer(200, listPageBody(ids(1, 25), 30, "tok1")), jsonAnswer(400, `{"error":"invalid_token","msg":"bad after_token"}`)},
		"short":             {jsonAnswer(200, listPageBody(ids(1, 25), 30, "tok1")), jsonAnswer(200, listPageBody(ids(26, 4), 30, ""))},
		"total changes":     {jsonAnswer(200, listPageBody(ids(1, 25), 30, "tok1")), jsonAnswer(200, listPageBody(ids(26, 5), 31, ""))},
		"repeated rows":     {jsonAnswer(200, listPageBody(ids(1, 25), 30, "tok1")), jsonAnswer(200, listPageBody(ids(21, 5), 30, ""))},
		"no total":          {jsonAnswer(200, `{"instances":[],"next_token":null}`)},
		"token loops":       {jsonAnswer(200, listPageBody(ids(1, 25), 60, "tok1")), jsonAnswer(200, listPageBody(ids(26, 25), 60, "tok1"))},
		"success false":     {jsonAnswer(200, `{"success":false,"msg":"v0 listing deprecated"}`)},
		// A complete-looking page (total 0, no rows) that says it failed.
		"success false, total given": {jsonAnswer(200, `{"success":false,"msg":"try later","total_instances":0,"instances":[],"next_token":null}`)},
	}
	for name, hs := range cases {
		t.Run(name, func(t *testing.T) {
			c, _, _, _ := newStub(t, hs...)
			l, err := c.ListInstances(context.Background())
			if err == nil {
				t.Fatalf("partial listing returned: %d rows", len(l.Instances))
			}
			if l.Instances != nil {
				t.Fatal("rows returned with an error")
			}
		})
	}
}

func TestKeyNeverInErrorsOrLogs(t *testing.T) {
	// A server that echoes the key back must not get it into our errors.
	echo := func(w http.ResponseWriter, r *http.Request) {
		answer(400, "text/plain", "bad key "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))(w, r)
	}
	c, _, _, logs := newStub(t, echo)
	var errs []error
	errs = append(errs, show5(c), create5(c), destroy5(c))
	_, err := c.ListInstances(context.Background())
	errs = append(errs, err)
	_, err = c.SearchOffers(context.Background(), market.Query{})
	errs = append(errs, err)
	for _, err := range errs {
		if err == nil || strings.Contains(err.Error(), testKey) {
			t.Errorf("error %v", err)
		}
	}
	// A transport error names the URL, which must not hold the key either.
	dead, err := New(Options{BaseURL: "http://127.0.0.1:1", APIKey: testKey, Clock: &waits{},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = dead.CurrentUser(context.Background())
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Errorf("transport error %v", err)
	}
	if logs.Len() == 0 || strings.Contains(logs.String(), testKey) {
		t.Errorf("logs (%d bytes) hold the key or nothing", logs.Len())
	}
	if !strings.Contains(logs.String(), "path=/api/v0/instances/5/") || strings.Contains(logs.String(), "owner=me") {
		t.Errorf("log lines lack the path or carry the query:\n%s", logs.String())
	}
}

func TestInstanceLogs(t *testing.T) {
	var srvURL string
	polls := 0
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /api/v0/instances/request_logs/5/", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) != `{"tail":"100"}` {
			http.Error(w, "bad body "+string(b), 400)
			return
		}
		jsonAnswer(200, `{"success":true,"result_url":"`+srvURL+`/logs/abc"}`)(w, r)
	})
	mux.HandleFunc("GET /logs/abc", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "key sent to the log store", 400)
			return
		}
		if polls++; polls < 3 {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "line1\nline2\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	srvURL = srv.URL
	w := &waits{}
	c, err := New(Options{BaseURL: srv.URL, APIKey: testKey, Clock: w})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.InstanceLogs(context.Background(), 5, 100)
	if err != nil || got != "line1\nline2\n" {
		t.Fatalf("logs %q, %v", got, err)
	}
	if len(w.all()) != 2 || w.all()[0] != 300*time.Millisecond {
		t.Fatalf("waits %v", w.all())
	}
}

func TestResolveAPIKey(t *testing.T) {
	home := t.TempDir()
	xdg := filepath.Join(home, "xdg")
	env := map[string]string{"HOME": home}
	getenv := func(k string) string { return env[k] }
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check := func(flag, wantKey, wantSrc string) {
		t.Helper()
		rk, err := ResolveAPIKey(flag, getenv, "")
		if err != nil || rk.Key != wantKey || !strings.Contains(rk.Source, wantSrc) {
			t.Fatalf("got %q from %q (%v), want %q from %q", rk.Key, rk.Source, err, wantKey, wantSrc)
		}
	}
	check("", "", "")
	write(filepath.Join(home, ".vast_api_key"), " legacy\n")
	check("", "legacy", ".vast_api_key")
	write(filepath.Join(home, ".config/vastai/vast_api_key"), "default\n")
	check("", "default", ".config/vastai/vast_api_key")
	env["XDG_CONFIG_HOME"] = xdg
	write(filepath.Join(xdg, "vastai/vast_api_key"), "xdgkey")
	check("", "xdgkey", "xdg/vastai/vast_api_key")
	write(filepath.Join(xdg, "vastai/vast_tfa_key"), "tfa\n")
	check("", "tfa", "vast_tfa_key")
	env["VAST_API_KEY"] = " envkey "
	check("", "envkey", "VAST_API_KEY")
	check(" flagkey", "flagkey", "flag")
	if rk, _ := ResolveAPIKey("", func(string) string { return "" }, filepath.Join(xdg, "vastai")); rk.Key != "tfa" {
		t.Fatalf("explicit config dir: %q", rk.Key)
	}
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	for _, u := range []string{"ftp://x", "http://user:pw@host", "http://host/?api_key=x", "::"} {
		if _, err := New(Options{BaseURL: u}); err == nil {
			t.Errorf("New accepted %q", u)
		}
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	c, s, _, _ := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere/", http.StatusFound)
	})
	err := stop5(c)
	var ae *provider.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusFound {
		t.Fatalf("err = %v, want an HTTP 302 error", err)
	}
	if n := len(s.requests()); n != 1 {
		t.Fatalf("%d requests: the redirect was followed", n)
	}
}

// A read whose answer never arrives is transient for every caller (waits,
// listings), not only for the client's own retries; a cancelled one is not.
func TestLostAnswerIsTransient(t *testing.T) {
	drop := func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}
	c, s, _, _ := newStub(t, drop, drop, drop, drop, drop)
	err := show5(c)
	if err == nil || !provider.Classify(err).Transient || provider.Classify(err).Refused {
		t.Fatalf("err = %v, class %+v: want transient, not refused", err, provider.Classify(err))
	}
	if n := len(s.requests()); n != 5 {
		t.Errorf("%d attempts, want 5", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c, _, _, _ = newStub(t, func(w http.ResponseWriter, r *http.Request) {
		cancel()
		<-r.Context().Done()
	})
	if _, err := c.ShowInstance(ctx, 5); err == nil || provider.Classify(err).Transient {
		t.Fatalf("cancelled: err = %v, class %+v, want not transient", err, provider.Classify(err))
	}
}
