// Package vast is the vast.ai REST client: the provider.Provider that talks
// to console.vast.ai, or to the simulator, which speaks the same API.
//
// The wire behaviour follows the official vastai CLI (see
// shared/vast-api.md) with two deliberate differences: the key travels only
// in the Authorization header, and a create is never retried after its
// outcome became unknown.
package vast

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/vastfleet/vastfleet/internal/clock"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/vasterr"
)

// DefaultBaseURL is where the official CLI sends its requests.
const DefaultBaseURL = "https://console.vast.ai"

// Version goes into the User-Agent; the build may overwrite it.
var Version = "dev"

// Options configure a Client. Zero values take the defaults noted.
type Options struct {
	BaseURL string // default DefaultBaseURL
	APIKey  string // sent only as "Authorization: Bearer"
	// HTTPClient defaults to a client with its own transport that does not
	// follow redirects of API calls; a caller's client should do the same.
	HTTPClient *http.Client
	Timeout    time.Duration
	UserAgent  string // default "vastfleet/<Version>"
	// MaxAttempts is the total number of tries of one retryable call.
	MaxAttempts int // default 5
	// MaxRefusedAttempts is the total number of tries of a call the
	// marketplace keeps refusing with 429, which did nothing and is safe
	// to send again: vast allows some endpoints only a few calls a minute
	// (search: ten), so refusals are waited out longer, their backoff
	// starting at RefusedBackoff (default 8 tries from 1s, about half a
	// minute in all).
	MaxRefusedAttempts int
	RefusedBackoff     time.Duration
	BaseBackoff        time.Duration // default 250ms
	MaxBackoff         time.Duration // default 20s
	// Clock is the marketplace's time: the client waits on it between
	// attempts and reads it for Retry-After dates (default clock.Wall).
	// A clock that also has InFlight(delta int) (clock.Virtual) is told
	// +1 when a request starts and -1 when its answer has been read, so
	// that it stands still meanwhile.
	Clock clock.Clock
	// SentClock is the clock StopInstanceSent and DestroyInstanceSent read
	// a request's send time on: the caller's, which dates what the
	// marketplace did (a simulator's own time when it runs faster than
	// the wall); default Clock.
	SentClock clock.Clock
	Logger    *slog.Logger // default: discard
	// RateLimit throttles every request this client sends; 0 = unlimited.
	RateLimit rate.Limit
	Burst     int // default 1 when RateLimit is set
	// Rand returns a number in [0,1) for backoff jitter; default math/rand.
	Rand func() float64
	// RequireTLS refuses a plain http:// BaseURL unless its host is this
	// machine (loopback): the real marketplace's key must not cross a
	// network in clear text.
	RequireTLS bool
}

// loopbackHost reports whether host is "localhost" or a loopback IP.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Client is the vast.ai API client. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	key     string
	hc      *http.Client
	timeout time.Duration
	ua      string
	max     int
	baseBO  time.Duration
	maxBO   time.Duration
	max429  int           // tries while the answer is 429
	base429 time.Duration // the first backoff after a 429
	clock   clock.Clock
	sentAt  clock.Clock // what a response's sent time is read on
	flight  inFlight    // the clock, when it counts requests; else nil
	log     *slog.Logger
	limiter *rate.Limiter
	rate    rate.Limit // the configured rate; 429s lower the limiter's below it
	rnd     func() float64

	qmu         sync.Mutex
	quarantined map[int64]bool // instance rows already logged as unreadable
}

var (
	_ provider.Provider  = (*Client)(nil)
	_ provider.Operator  = (*Client)(nil)
	_ provider.SentTimer = (*Client)(nil)
)

// New builds a client; it does no I/O.
func New(opts Options) (*Client, error) {
	raw := opts.BaseURL
	if raw == "" {
		raw = DefaultBaseURL
	}
	// Errors show the URL only through RedactURL: it may carry a key.
	base, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text quotes the whole URL
		}
		return nil, fmt.Errorf("vast: base URL %s: %w", RedactURL(raw), err)
	}
	if base.Scheme != "http" && base.Scheme != "https" || base.Host == "" {
		return nil, fmt.Errorf("vast: base URL %s: want http(s)://host", RedactURL(raw))
	}
	if base.User != nil || base.RawQuery != "" {
		// Anything secret in the URL would end up in *url.Error texts.
		return nil, fmt.Errorf("vast: base URL %s must not carry credentials or a query", RedactURL(raw))
	}
	if opts.RequireTLS && base.Scheme == "http" && !loopbackHost(base.Hostname()) {
		return nil, fmt.Errorf("vast: base URL %s: plain http:// would send the API key unencrypted; use https:// (http is only for a server on this machine)", RedactURL(raw))
	}
	if strings.ContainsAny(opts.APIKey, "\r\n") {
		return nil, errors.New("vast: API key contains a line break")
	}
	c := &Client{
		base:    base,
		key:     opts.APIKey,
		hc:      opts.HTTPClient,
		timeout: opts.Timeout,
		ua:      opts.UserAgent,
		max:     opts.MaxAttempts,
		max429:  opts.MaxRefusedAttempts,
		base429: opts.RefusedBackoff,
		baseBO:  opts.BaseBackoff,
		maxBO:   opts.MaxBackoff,
		clock:   opts.Clock,
		sentAt:  opts.SentClock,
		log:     opts.Logger,
		rnd:     opts.Rand,
	}
	if c.hc == nil {
		c.hc = &http.Client{
			Transport:     http.DefaultTransport.(*http.Transport).Clone(),
			CheckRedirect: noAPIRedirects,
		}
	}
	if c.timeout <= 0 {
		c.timeout = 120 * time.Second
	}
	if c.ua == "" {
		c.ua = "vastfleet/" + Version
	}
	if c.max <= 0 {
		c.max = 5
	}
	if c.max429 <= 0 {
		c.max429 = 8
	}
	if c.base429 <= 0 {
		c.base429 = time.Second
	}
	if c.baseBO <= 0 {
		c.baseBO = 250 * time.Millisecond
	}
	if c.maxBO <= 0 {
		c.maxBO = 20 * time.Second
	}
	if c.clock == nil {
		c.clock = clock.Wall{}
	}
	c.flight, _ = c.clock.(inFlight)
	if c.sentAt == nil {
		c.sentAt = c.clock
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.rnd == nil {
		c.rnd = rand.Float64
	}
	if opts.RateLimit > 0 {
		b := opts.Burst
		if b <= 0 {
			b = 1
		}
		c.limiter = rate.NewLimiter(opts.RateLimit, b)
		c.rate = opts.RateLimit
	}
	return c, nil
}

// inFlight is a clock that stands still while a request is in flight
// (clock.Virtual): requests then take none of the market's time.
type inFlight interface{ InFlight(delta int) }

// noAPIRedirects refuses to follow a redirect of an authenticated call: Go
// would turn a redirected PUT or POST into a body-less GET, so a create
// could silently become something else. The 3xx comes back as an error.
// Unauthenticated fetches (log result URLs) may be redirected.
func noAPIRedirects(req *http.Request, via []*http.Request) error {
	if via[0].Header.Get("Authorization") != "" {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// retryPolicy says which failures of one call may be repeated.
type retryPolicy int

const (
	// idempotent: GET-like calls; 429, 500, 502-504 and transport errors.
	retryRead retryPolicy = iota
	// idempotent writes (state, label, destroy): as read, without 500,
	// because a 500 on a write may have half-applied.
	retryWrite
	// create: only 429, which means the request was refused.
	retryCreate
	// never retry (log fetches poll on their own).
	retryNone
)

// call is one API request.
type call struct {
	method string
	path   string // starts with /api/
	query  string // encoded, without '?'
	body   any    // nil: {} for non-GET
	policy retryPolicy
	noAuth bool
	abs    string // absolute URL (result_url); overrides path
}

// response is a completed HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
	sent   time.Time // when the request left, on the client's clock
}

// maxBody bounds what one answer may hold (a large search is a few MB).
const maxBody = 64 << 20

// transportError marks failures where no (whole) HTTP answer arrived.
type transportError struct {
	method, path string
	err          error
	host         string
}

func (e *transportError) Error() string {
	var dns *net.DNSError
	var op *net.OpError
	if errors.As(e.err, &dns) || errors.As(e.err, &op) && op.Op == "dial" {
		// No answer at all: the fix is on the user's side of the wire.
		return fmt.Sprintf("cannot reach %s (check the network or --api-url): %s %s: %v", e.host, e.method, e.path, e.err)
	}
	return fmt.Sprintf("%s %s: %v", e.method, e.path, e.err)
}

// Unwrap gives the cause and provider.ErrNoAnswer, which classifies it.
func (e *transportError) Unwrap() []error { return []error{e.err, provider.ErrNoAnswer} }

// do sends c with retries and returns the final answer, which may be a
// non-2xx status; the caller turns that into an error with apiError. A nil
// response comes with a *transportError or a context error.
func (c *Client) do(ctx context.Context, cl call) (*response, error) {
	var payload []byte
	if cl.method != http.MethodGet {
		b := cl.body
		if b == nil {
			b = struct{}{}
		}
		var err error
		if payload, err = json.Marshal(b); err != nil {
			return nil, fmt.Errorf("%s %s: encode body: %w", cl.method, cl.path, err)
		}
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if c.limiter != nil {
			if err := c.limiter.Wait(ctx); err != nil {
				return nil, err
			}
		}
		resp, err := c.once(ctx, cl, payload, attempt)
		if err == nil {
			c.adapt(resp.status)
		}
		last := attempt >= c.max
		if err != nil {
			if ctx.Err() != nil {
				// Cancellation is the caller's decision, never retried.
				return nil, &transportError{cl.method, cl.path, err, c.base.Host}
			}
			if last || !retryable(cl.policy, provider.Classify(provider.ErrNoAnswer), 0) {
				return nil, &transportError{cl.method, cl.path, err, c.base.Host}
			}
			if err := c.clock.Sleep(ctx, c.backoff(attempt, 0)); err != nil {
				return nil, err
			}
			continue
		}
		wait := c.backoff(attempt, c.retryAfter(resp.header))
		if resp.status == http.StatusTooManyRequests {
			last = attempt >= max(c.max429, c.max)
			wait = c.backoffFrom(c.base429, attempt, c.retryAfter(resp.header))
		}
		if last || !retryable(cl.policy, provider.ClassifyStatus(resp.status), resp.status) {
			return resp, nil
		}
		if err := c.clock.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// Rate is the request rate the client allows itself now (0: unlimited).
func (c *Client) Rate() rate.Limit {
	if c.limiter == nil {
		return 0
	}
	return c.limiter.Limit()
}

// minRateShare is the floor a run of 429s can push the rate down to.
const minRateShare = 1.0 / 16

// adapt slows the whole client down when the marketplace says it is asking
// too often, halving its rate on every 429 (vast.ai sends no Retry-After),
// and wins the configured rate back a little with every answer that is
// not a 429.
func (c *Client) adapt(status int) {
	if c.limiter == nil {
		return
	}
	l := c.limiter.Limit()
	if status == 429 {
		l = max(l/2, c.rate*minRateShare)
	} else {
		l = min(l*1.05, c.rate)
	}
	c.limiter.SetLimit(l)
}

// retryable applies a call's policy to what provider.Classify says about
// its failure (status 0: no answer came).
func retryable(p retryPolicy, c provider.Class, status int) bool {
	switch p {
	case retryRead:
		return c.Transient
	case retryWrite:
		return c.Transient && status != http.StatusInternalServerError
	case retryCreate:
		return c.Transient && c.Refused
	}
	return false
}

// backoff is capped exponential backoff with full jitter; a server's
// Retry-After wins when it is given.
func (c *Client) backoff(attempt int, after time.Duration) time.Duration {
	return c.backoffFrom(c.baseBO, attempt, after)
}

// backoffFrom is backoff starting at base.
func (c *Client) backoffFrom(base time.Duration, attempt int, after time.Duration) time.Duration {
	if after > 0 {
		return after
	}
	d := base << min(attempt-1, 30)
	if d <= 0 || d > c.maxBO {
		d = c.maxBO
	}
	return time.Duration(c.rnd() * float64(d))
}

// maxRetryAfter bounds how long a server may make us wait in one go.
const maxRetryAfter = 5 * time.Minute

func (c *Client) retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n <= 0 {
			return 0
		}
		d = time.Duration(n * float64(time.Second))
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(c.clock.Now())
		if d <= 0 {
			return 0
		}
	} else {
		return 0
	}
	return min(d, maxRetryAfter)
}

// once sends one attempt.
func (c *Client) once(ctx context.Context, cl call, payload []byte, attempt int) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	target := cl.abs
	if target == "" {
		u := *c.base
		u.Path = c.base.Path + cl.path
		u.RawQuery = cl.query
		target = u.String()
	}
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, target, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", c.ua)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" && !cl.noAuth {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if c.flight != nil {
		c.flight.InFlight(1)
		defer c.flight.InFlight(-1)
	}
	sent, start := c.sentAt.Now(), time.Now()
	res, err := c.hc.Do(req)
	if err != nil {
		c.log.DebugContext(ctx, "vast request", "method", cl.method, "path", cl.path,
			"attempt", attempt, "duration", time.Since(start), "error", c.redact(err.Error()))
		return nil, err
	}
	defer res.Body.Close()
	b, err := readBody(res.Body, res.ContentLength)
	c.log.DebugContext(ctx, "vast request", "method", cl.method, "path", cl.path,
		"status", res.StatusCode, "attempt", attempt, "duration", time.Since(start))
	if err != nil {
		// The status arrived but the answer did not: treat as lost.
		return nil, fmt.Errorf("reading answer (HTTP %d): %w", res.StatusCode, err)
	}
	if len(b) > maxBody {
		return nil, fmt.Errorf("answer larger than %d bytes", maxBody)
	}
	return &response{status: res.StatusCode, header: res.Header, body: b, sent: sent}, nil
}

// readBody reads an answer of at most maxBody+1 bytes. When the server
// says how long it is, the body goes into one buffer of that size (a
// search page is megabytes: no doubling and copying on the way); a body
// longer than announced is still read to its end, up to the same bound,
// and a shorter one is an error, as it is to net/http.
func readBody(r io.Reader, length int64) ([]byte, error) {
	if length <= 0 || length > maxBody {
		return io.ReadAll(io.LimitReader(r, maxBody+1))
	}
	b := make([]byte, length, length+1)
	if n, err := io.ReadFull(r, b); err != nil {
		// Shorter than announced: the answer was lost on the way.
		return b[:n], err
	}
	// Anything past the announced length (a server that got it wrong).
	rest, err := io.ReadAll(io.LimitReader(r, maxBody+1-length))
	return append(b, rest...), err
}

// redact removes the key from text that may reach logs or errors. The key is
// never put in a URL, so this is a second line of defence only.
func (c *Client) redact(s string) string {
	if c.key == "" {
		return s
	}
	return strings.ReplaceAll(s, c.key, "[REDACTED]")
}

// maxMsg bounds how much of a server's answer goes into an error.
const maxMsg = 300

func trimMsg(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxMsg {
		s = s[:maxMsg] + "…"
	}
	return s
}

// parseErrorBody pulls the code and message out of an answer.
func parseErrorBody(b []byte) (code, msg string, isJSON bool) {
	code, msg, isJSON = vasterr.Parse(b)
	return code, trimMsg(msg), isJSON
}

// op says what a call was about, for classifying a 404.
type op int

const (
	opOther op = iota
	opInstance
	opCreate
)

// apiError classifies a non-2xx (or success:false) answer.
func (c *Client) apiError(cl call, o op, status int, body []byte) *provider.APIError {
	code, msg, isJSON := parseErrorBody(body)
	e := &provider.APIError{Method: cl.method, Path: cl.path, Status: status,
		Code: c.redact(code), Msg: c.redact(msg)}
	e.Kind = classify(o, status, code, msg, isJSON)
	return e
}

func classify(o op, status int, code, msg string, isJSON bool) error {
	lc := strings.ToLower(code)
	switch {
	case vasterr.Auth(status, code, msg):
		return provider.ErrAuth
	case vasterr.Balance(code, msg) && status >= 400 && status < 500:
		return provider.ErrInsufficientBalance
	case status == 429:
		return provider.ErrRateLimited
	case status >= 500:
		if o == opCreate {
			return provider.ErrMaybeCreated
		}
		return provider.ErrServer
	case o == opCreate && (status == 404 || status == 410 || lc == "no_such_ask"):
		return provider.ErrOfferGone
	case o == opInstance && vasterr.Gone(status, code, msg, isJSON):
		return provider.ErrNotFound
	}
	return nil
}

// decode reads a 2xx JSON answer into v; anything else becomes an error.
func (c *Client) decode(cl call, o op, resp *response, v any) error {
	if resp.status < 200 || resp.status > 299 {
		return c.apiError(cl, o, resp.status, resp.body)
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(resp.body, v); err != nil {
		return fmt.Errorf("%s %s: HTTP %d: answer is not the expected JSON: %v (%q)",
			cl.method, cl.path, resp.status, err, c.redact(trimMsg(string(resp.body))))
	}
	return nil
}

// checkSuccess turns a 2xx {"success": false, ...} into an error.
func (c *Client) checkSuccess(cl call, o op, resp *response) error {
	var eb struct {
		Success *bool `json:"success"`
	}
	if json.Unmarshal(resp.body, &eb) == nil && eb.Success != nil && !*eb.Success {
		e := c.apiError(cl, o, resp.status, resp.body)
		if e.Msg == "" {
			e.Msg = c.redact(trimMsg(string(resp.body)))
		}
		return e
	}
	return nil
}

// isJSONType reports whether a Content-Type names JSON.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}
