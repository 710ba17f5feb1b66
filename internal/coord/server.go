package coord

import (
	"context"
	crand "crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Config is what New needs. Only DB is required.
type Config struct {
	DB  *DB
	Log *slog.Logger
	// Clock is the one clock: heartbeat ages, received times, cost cache
	// (default clock.Wall).
	Clock clock.Clock
	// HeartbeatInterval is told to agents (default 10 s). A node is stale
	// after StaleAfter without a heartbeat (default 3 intervals) and dead
	// after DeadAfter (default 10 intervals).
	HeartbeatInterval time.Duration
	StaleAfter        time.Duration
	DeadAfter         time.Duration
	// ItemLease is how long a work item's lease lasts past its node's
	// latest heartbeat (default StaleAfter): a node that goes quiet that
	// long loses its items to the queue.
	ItemLease time.Duration
	// OrphanAfter and OrphanPolicy are told to agents for their dead-man
	// switch; zero and "" leave the agent's own settings.
	OrphanAfter  time.Duration
	OrphanPolicy string
	// MarketDepth, when set, draws the market's depth curve (SVG) for the
	// dashboard; it is called at most once per DepthEvery.
	MarketDepth func(ctx context.Context) ([]byte, error)
	DepthEvery  time.Duration // default 10 min, wall time
	// AgentBinary, when set, serves the agent binary to onstarts.
	AgentBinary func() (io.ReadCloser, string, error)
	// Costs, when set, gives a fleet's $/hr, spend so far and $/hr per
	// instance id. It is called at most once per CostsEvery per fleet.
	Costs      func(ctx context.Context, fleet string) (dph, spent float64, perNode map[int64]float64, err error)
	CostsEvery time.Duration // default 5 s
	// TokenRate and TokenBurst limit requests per token (default 1000/s,
	// burst 2000: a 5,000-node fleet at the default interval with room
	// for findings). Measured on the wall clock, as it protects the CPU.
	TokenRate  float64
	TokenBurst int
	// PushEvery is how often SSE subscribers get a snapshot (default 1 s).
	PushEvery time.Duration
	// Durable, when set, is called after findings or an item result are
	// committed and before they are acknowledged: it returns once the
	// commit has reached wherever it must to outlive this machine (a
	// replica). Until it returns nothing is acknowledged; when it fails the
	// agent is told to send again (a resent finding is stored once).
	Durable func(ctx context.Context) error
	// Secure marks the viewer cookie Secure (set it when serving TLS).
	Secure bool
	// Members says which instances belong to a fleet (the caller's store
	// and marketplace listing): only those enroll, and a credential whose
	// instance left is revoked, checked every RevokeEvery (default 1 min,
	// wall time). Without it no instance can enroll.
	Members     Membership
	RevokeEvery time.Duration
	// BadHosts, when set, hears of machines caught returning wrong results
	// (see validation.go), for the store's bad-host list.
	BadHosts BadHostSink
	// Verify runs a job's verify command on this machine (default
	// ShellVerifier).
	Verify Verifier
	// Rand draws adaptive replication's and spot checks' coin flips, in
	// [0, 1) (default math/rand/v2; tests seed their own).
	Rand func() float64
}

// Server is the coordinator: the HTTP API of package wire, the live
// totals, the dashboard and /metrics, for any number of fleets.
type Server struct {
	cfg        Config
	db         *DB
	log        *slog.Logger
	flushEvery time.Duration
	mux        *http.ServeMux
	// replies holds each fleet's encoded wire.HeartbeatReply.
	replies replyCache

	auth    authTable
	members members
	// enrolling admits enrollments a few at a time (see maxEnrolling).
	enrolling chan struct{}
	limitMu   sync.Mutex
	limiters  map[string]*rate.Limiter // by token hash
	blobs     map[string]int           // probe downloads served, by token hash
	findingsQ chan *findingsReq

	mu     sync.Mutex
	fleets map[string]*fleetLive
	dirty  map[nodeKey]struct{}

	metricsMu sync.Mutex
	metrics   map[string]http.Handler // per fleet

	depth depthCache

	// queueMu orders enqueues before Close: a batch queued while not
	// closed is one the writer still drains.
	queueMu   sync.RWMutex
	closed    bool
	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// New loads the fleets, the last known nodes and the findings counts from
// the database and starts the writer and the SSE pusher. Close stops them.
func New(cfg Config) (*Server, error) {
	if cfg.DB == nil {
		return nil, errors.New("coord: Config.DB is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Wall{}
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 10 * time.Second
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 3 * cfg.HeartbeatInterval
	}
	if cfg.DeadAfter <= 0 {
		cfg.DeadAfter = 10 * cfg.HeartbeatInterval
	}
	if cfg.DeadAfter < cfg.StaleAfter {
		return nil, fmt.Errorf("coord: DeadAfter %v is shorter than StaleAfter %v", cfg.DeadAfter, cfg.StaleAfter)
	}
	if cfg.ItemLease <= 0 {
		cfg.ItemLease = cfg.StaleAfter
	}
	switch cfg.OrphanPolicy {
	case "", wire.PolicyStop, wire.PolicyDestroy:
	default:
		return nil, fmt.Errorf("coord: orphan policy %q: want %q or %q", cfg.OrphanPolicy, wire.PolicyStop, wire.PolicyDestroy)
	}
	if cfg.CostsEvery <= 0 {
		cfg.CostsEvery = 5 * time.Second
	}
	if cfg.TokenRate <= 0 {
		cfg.TokenRate = 1000
	}
	if cfg.TokenBurst <= 0 {
		cfg.TokenBurst = 2 * int(math.Ceil(cfg.TokenRate))
	}
	if cfg.PushEvery <= 0 {
		cfg.PushEvery = time.Second
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.RevokeEvery <= 0 {
		cfg.RevokeEvery = time.Minute
	}
	s := &Server{
		cfg:        cfg,
		db:         cfg.DB,
		log:        cfg.Log,
		flushEvery: time.Second,
		limiters:   map[string]*rate.Limiter{},
		findingsQ:  make(chan *findingsReq, maxGroup),
		enrolling:  make(chan struct{}, maxEnrolling),
		fleets:     map[string]*fleetLive{},
		dirty:      map[nodeKey]struct{}{},
		metrics:    map[string]http.Handler{},
		stop:       make(chan struct{}),
	}
	s.auth.db = cfg.DB
	s.replies.m = map[string]cachedReply{}
	s.members.src = cfg.Members
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.auth.reload(ctx); err != nil {
		return nil, fmt.Errorf("coord: loading fleets: %w", err)
	}
	if err := s.loadLive(ctx); err != nil {
		return nil, fmt.Errorf("coord: loading last known state: %w", err)
	}
	s.routes()
	s.wg.Add(3)
	go s.writer()
	go s.pusher()
	go s.revoker()
	return s, nil
}

// Close stops the pusher (ending every event stream), commits the findings
// already queued and saves the nodes' last heartbeats. It does not close
// the DB, which belongs to the caller.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.queueMu.Lock()
		s.closed = true
		s.queueMu.Unlock()
		close(s.stop)
		s.wg.Wait()
	})
	return nil
}

// Handler is the whole HTTP surface.
func (s *Server) Handler() http.Handler { return s.mux }

// now is the coordinator's one clock.
func (s *Server) now() time.Time { return s.cfg.Clock.Now() }

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("POST "+wire.PathEnroll, s.withAuth(roleBootstrap, s.handleEnroll))
	m.HandleFunc("POST "+wire.PathHeartbeat, s.withAuth(roleAgent, s.handleHeartbeat))
	m.HandleFunc("POST "+wire.PathFindings, s.withAuth(roleAgent, s.handleFindings))
	m.HandleFunc("POST "+wire.PathItemsLease, s.withAuth(roleAgent, s.handleItemLease))
	m.HandleFunc("POST "+wire.PathItemsResult, s.withAuth(roleAgent, s.handleItemResult))
	m.HandleFunc("GET "+wire.PathState, s.withAuth(roleViewer, s.handleState))
	m.HandleFunc("GET "+wire.PathEvents, s.withAuth(roleViewer, s.handleEvents))
	m.HandleFunc("GET "+PathHistory, s.withAuth(roleViewer, func(w http.ResponseWriter, r *http.Request, c caller) {
		writeJSON(w, s.History(c.fleet))
	}))
	m.HandleFunc("GET "+PathDepth, s.withAuth(roleViewer, s.handleDepth))
	m.HandleFunc("GET "+wire.PathMetrics, s.withAuth(roleViewer, s.handleMetrics))
	m.HandleFunc("GET "+wire.PathAgentBin, s.withAuth(roleBootstrap+","+roleAgent, s.handleAgentBin))
	m.HandleFunc("GET "+wire.PathAgentSum, s.withAuth(roleBootstrap+","+roleAgent, s.handleAgentSum))
	m.HandleFunc("GET "+wire.PathProbeBlob, s.withAuth(roleAgent, s.handleProbeBlob))
	m.HandleFunc("GET /static/", s.handleStatic)
	m.HandleFunc("GET /{$}", s.handleDashboard)
	// Everything else: a JSON 404/405 rather than the mux's plain text.
	allowed := map[string]string{
		wire.PathEnroll: "POST", wire.PathHeartbeat: "POST", wire.PathFindings: "POST", wire.PathState: "GET", wire.PathEvents: "GET",
		wire.PathItemsLease: "POST", wire.PathItemsResult: "POST",
		wire.PathMetrics: "GET", wire.PathAgentBin: "GET", wire.PathAgentSum: "GET", PathHistory: "GET", PathDepth: "GET", "/": "GET",
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if method, ok := allowed[r.URL.Path]; ok {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, r.URL.Path+" answers "+method+" only")
			return
		}
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	s.mux = m
}

// DashboardURL is the link that opens a fleet's dashboard: baseURL is the
// coordinator as the user's browser reaches it, viewer the fleet's viewer
// token (swapped for a cookie on first use).
func DashboardURL(baseURL, viewer string) string {
	return strings.TrimRight(baseURL, "/") + "/?token=" + url.QueryEscape(viewer)
}

// writeError is every non-2xx answer: a wire.Error with a safe message.
func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(wire.Error{Error: msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// caller is who a request authenticated as: for an agent, the node its
// credential was issued to (never what a body says).
type caller struct {
	fleet      string
	role       string
	hash       string
	node       string
	instanceID int64
	machineID  int64
	image      string
}

const viewerCookie = "vastfleet_viewer"

// bearer is the token of a request: the Authorization header, or for a
// viewer's GET the dashboard cookie.
func bearer(r *http.Request, role string) string {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	if role == roleViewer {
		if c, err := r.Cookie(viewerCookie); err == nil {
			return c.Value
		}
	}
	return ""
}

// withAuth checks the token and its role and the token's rate before the
// handler reads any of the body.
func (s *Server) withAuth(role string, h func(http.ResponseWriter, *http.Request, caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r, role)
		if tok == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vastfleet"`)
			writeError(w, http.StatusUnauthorized, "missing token: send Authorization: Bearer TOKEN")
			return
		}
		e, ok := s.auth.lookup(r.Context(), tok)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vastfleet", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, "unknown token")
			return
		}
		c := caller{fleet: e.fleet, role: e.role, hash: string(e.hash),
			node: e.cred.node, instanceID: e.cred.instanceID, machineID: e.cred.machineID, image: e.cred.image}
		if !slices.Contains(strings.Split(role, ","), e.role) {
			msg := fmt.Sprintf("a %s token cannot %s %s", e.role, r.Method, r.URL.Path)
			if e.role == roleBootstrap {
				msg += ": enroll first (POST " + wire.PathEnroll + ") and use the instance's own credential"
			}
			if e.role == roleViewer {
				writeError(w, http.StatusForbidden, msg)
			} else {
				s.forbid(w, c, msg)
			}
			return
		}
		if wait, ok := s.allow(c.hash); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			writeError(w, http.StatusTooManyRequests, "rate limit exceeded for this token")
			return
		}
		if r.Method == http.MethodPost {
			if ct := r.Header.Get("Content-Type"); ct != "" {
				if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
					writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
					s.countBad(c, badMalformed)
					return
				}
			}
			if r.ContentLength > wire.MaxBody {
				writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", wire.MaxBody))
				s.countBad(c, badOversized)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, wire.MaxBody)
		}
		h(w, r, c)
	}
}

// allow takes one token from the caller's bucket; when empty it says how
// long until one is free.
func (s *Server) allow(hash string) (time.Duration, bool) {
	s.limitMu.Lock()
	l := s.limiters[hash]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(s.cfg.TokenRate), s.cfg.TokenBurst)
		s.limiters[hash] = l
	}
	s.limitMu.Unlock()
	now := time.Now()
	res := l.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return max(d, time.Second), false
	}
	return 0, true
}

// decode reads one JSON value of the body, mapping each failure to its
// status: 413 over the limit, 400 for anything not a single valid value.
// It returns what was wrong ("" when nothing was): "oversized" or
// "malformed".
func decode(w http.ResponseWriter, r *http.Request, v any) (bad string) {
	dec := json.NewDecoder(r.Body)
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the JSON value")
	}
	if err == nil {
		// Read to EOF so a body over the limit is seen even when a valid
		// value came first.
		_, err = io.Copy(io.Discard, r.Body)
	}
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", wire.MaxBody))
		return badOversized
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "empty body: want a JSON object")
	default:
		writeError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
	}
	return badMalformed
}

// Why a request was refused as bad input, as counted on /metrics.
const (
	badMalformed = "malformed"
	badOversized = "oversized"
	badInvalid   = "invalid"
	// badReplay is a result acknowledged but not stored: sent again, or
	// for a lease lost meanwhile. Counted apart: an honest agent retrying
	// after a dropped answer sends them too.
	badReplay = "replay"
)

// admit decodes an agent's request into v, checks that it speaks for the
// token's own fleet (*fleet, read after decoding) and that validate passes;
// when it returns false it has answered the request, and bad input is
// counted against the caller's node.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, c caller, v any, fleet *string, what string, validate func() error) bool {
	if bad := decode(w, r, v); bad != "" {
		s.countBad(c, bad)
		return false
	}
	if *fleet != c.fleet {
		writeError(w, http.StatusForbidden, "this token belongs to another fleet than "+strconv.Quote(*fleet))
		s.refuse(c.fleet, c.who())
		return false
	}
	if err := validate(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid "+what+": "+err.Error())
		s.countBad(c, badInvalid)
		return false
	}
	return true
}

// admitNode is admit for a request a node sends about itself: its *node,
// when left empty, is the credential's node (before validate runs), and a
// request naming another node is forbidden.
func (s *Server) admitNode(w http.ResponseWriter, r *http.Request, c caller, v any, fleet, node *string, what string, validate func() error) bool {
	return s.admit(w, r, c, v, fleet, what, func() error {
		if *node == "" {
			*node = c.node
		}
		return validate()
	}) && s.sameNode(w, c, node)
}

func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request, c caller) {
	var hb wire.Heartbeat
	if !s.admitNode(w, r, c, &hb, &hb.Fleet, &hb.Node, "heartbeat", func() error { return validateHeartbeat(&hb) }) {
		return
	}
	hb.InstanceID = c.instanceID
	if err := s.recordHeartbeat(&hb); err != nil {
		writeError(w, http.StatusTooManyRequests, err.Error())
		return
	}
	// The reply is the same for every heartbeat of a fleet: encoded once
	// a heartbeat interval, sent with a length rather than chunked.
	reply := s.heartbeatReply(r.Context(), c.fleet)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(reply)))
	_, _ = w.Write(reply)
}

func (s *Server) handleFindings(w http.ResponseWriter, r *http.Request, c caller) {
	var fs wire.Findings
	if !s.admitNode(w, r, c, &fs, &fs.Fleet, &fs.Node, "findings", func() error { return validateFindings(&fs) }) {
		return
	}
	fs.InstanceID = c.instanceID
	rejected, ok := s.verifyFindings(w, r, c, &fs)
	if !ok {
		return
	}
	if len(fs.Items) == 0 {
		writeJSON(w, wire.FindingsAck{Acked: rejected, Rejected: rejected})
		return
	}
	now := s.now()
	for i := range fs.Items {
		fs.Items[i].Node = fs.Node   // the batch's node, whatever an item claims
		fs.Items[i].ReceivedAt = now // the coordinator's clock, whatever the node says
		if fs.Items[i].At.IsZero() {
			fs.Items[i].At = now
		}
	}
	req := &findingsReq{fleet: c.fleet, node: fs.Node, items: fs.Items, receivedAt: now, done: make(chan error, 1)}
	if !s.enqueue(r.Context(), req) {
		writeError(w, http.StatusServiceUnavailable, errClosing.Error())
		return
	}
	// Once queued the writer always answers (it drains the queue before
	// it stops), so this wait cannot hang past Close.
	if err := <-req.done; err != nil {
		writeError(w, http.StatusServiceUnavailable, "findings not stored, send them again")
		return
	}
	ack := wire.FindingsAck{Acked: make([]string, len(fs.Items)), Stored: req.stored, Duplicates: len(fs.Items) - req.stored, Rejected: rejected}
	for i, it := range fs.Items {
		ack.Acked[i] = it.Key
	}
	ack.Acked = append(ack.Acked, rejected...)
	writeJSON(w, ack)
}

// enqueue hands a batch to the writer unless the server is closing or the
// client gave up.
func (s *Server) enqueue(ctx context.Context, req *findingsReq) bool {
	s.queueMu.RLock()
	defer s.queueMu.RUnlock()
	if s.closed {
		return false
	}
	select {
	case s.findingsQ <- req:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Server) handleState(w http.ResponseWriter, r *http.Request, c caller) {
	writeJSON(w, s.Snapshot(r.Context(), c.fleet))
}

// agentBinary opens the agent binary this coordinator serves, with its
// sha256; when ok is false it has answered the request.
func (s *Server) agentBinary(w http.ResponseWriter) (rc io.ReadCloser, sum string, ok bool) {
	if s.cfg.AgentBinary == nil {
		writeError(w, http.StatusNotFound, "this coordinator does not serve the agent binary")
		return nil, "", false
	}
	rc, sum, err := s.cfg.AgentBinary()
	if err != nil {
		s.log.Error("agent binary", "err", err)
		writeError(w, http.StatusInternalServerError, "agent binary unavailable")
		return nil, "", false
	}
	return rc, sum, true
}

func (s *Server) handleAgentBin(w http.ResponseWriter, r *http.Request, _ caller) {
	rc, sum, ok := s.agentBinary(w)
	if !ok {
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Vastfleet-Sha256", sum)
	if _, err := io.Copy(w, rc); err != nil {
		if r.Context().Err() != nil || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
			// The instance went away mid-download (a launch stops each
			// one as it boots); it fetches the binary again when it runs.
			s.log.Debug("agent binary download cut short by the instance", "err", err)
			return
		}
		s.log.Warn("sending agent binary", "err", err)
	}
}

// probeBlobsPerCredential is how many probe downloads one instance's
// credential gets: its boot probe needs one (a probe is kept across
// restarts), and a host that asks for more only spends this computer's
// bandwidth.
const probeBlobsPerCredential = 4

// probeChunk is what a probe download repeats: random bytes, so that no
// link compresses them.
var probeChunk = func() []byte {
	b := make([]byte, 64<<10)
	_, _ = crand.Read(b)
	return b
}()

// handleProbeBlob sends ?bytes=N bytes for the boot probe to time.
func (s *Server) handleProbeBlob(w http.ResponseWriter, r *http.Request, c caller) {
	n, err := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
	if err != nil || n <= 0 || n > wire.MaxProbeBlob {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("bytes: want 1 to %d", wire.MaxProbeBlob))
		return
	}
	s.limitMu.Lock()
	if s.blobs == nil {
		s.blobs = map[string]int{}
	}
	s.blobs[c.hash]++
	served := s.blobs[c.hash]
	s.limitMu.Unlock()
	if served > probeBlobsPerCredential {
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("this instance had its %d probe downloads", probeBlobsPerCredential))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	for n > 0 {
		k := min(n, int64(len(probeChunk)))
		if _, err := w.Write(probeChunk[:k]); err != nil {
			return // the agent's window ended, or it went away
		}
		n -= k
	}
}

func (s *Server) handleAgentSum(w http.ResponseWriter, r *http.Request, _ caller) {
	rc, sum, ok := s.agentBinary(w)
	if !ok {
		return
	}
	rc.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, sum+"\n")
}

// authTable maps token hashes to fleets. Fleets created by another process
// (a launch beside a running coordinator) are found by reloading on a
// miss, at most a few times a second so bad tokens cannot hammer SQLite.
type authTable struct {
	db      *DB
	mu      sync.RWMutex
	entries []tokenEntry
	// creds are the instances' credentials by token hash: a map, as the
	// key is the sha256 of 256 random bits, so lookup timing tells an
	// attacker nothing it could use to come closer.
	creds   map[string]credential
	reloads *rate.Limiter
}

func (a *authTable) reload(ctx context.Context) error {
	es, err := a.db.tokenHashes(ctx)
	if err != nil {
		return err
	}
	creds, err := a.db.liveCredentials(ctx)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.entries = es
	a.creds = creds
	if a.reloads == nil {
		a.reloads = rate.NewLimiter(5, 5)
	}
	a.mu.Unlock()
	return nil
}

func (a *authTable) addCredential(h []byte, c credential) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.creds == nil {
		a.creds = map[string]credential{}
	}
	a.creds[string(h)] = c
}

func (a *authTable) find(h []byte) (tokenEntry, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if c, ok := a.creds[string(h)]; ok {
		return tokenEntry{hash: h, fleet: c.fleet, role: roleAgent, cred: c}, true
	}
	var found tokenEntry
	ok := false
	// Every entry is compared, in constant time, so the answer's timing
	// says nothing about which hash came close.
	for _, e := range a.entries {
		if subtle.ConstantTimeCompare(h, e.hash) == 1 {
			found, ok = e, true
		}
	}
	return found, ok
}

func (a *authTable) lookup(ctx context.Context, tok string) (tokenEntry, bool) {
	h := hashToken(tok)
	if e, ok := a.find(h); ok {
		return e, true
	}
	if !a.reloads.Allow() {
		return tokenEntry{}, false
	}
	if err := a.reload(ctx); err != nil {
		return tokenEntry{}, false
	}
	return a.find(h)
}
