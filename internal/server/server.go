// Package server is `vastfleet serve`: the controller as a long-running
// service. It hosts the job runner (each submitted task file runs as an
// `up` inside the server, on the server's store, market and coordinator),
// runs the read and lifecycle commands clients ask for, and guards all of
// it with API tokens: a token names a user and a role (viewer or
// operator), it is kept only as its sha256, it can expire and be revoked,
// and every action, allowed or refused, goes to an audit log.
//
// The server never sends the marketplace's API key to a client: it runs
// commands with it, and answers with their output.
//
// What runs a command is given (Config.Run): the command line's
// composition root builds it, so this package names no adapter.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
)

// HeaderVersion carries the client's version; the server refuses a client
// of another version with a message that says both.
const HeaderVersion = "Vastfleet-Version"

// Runner runs one vastfleet command (args, the command first) in the
// server's data dir, writing its output to stdout and stderr, and returns
// its exit code.
type Runner func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Config is what a Server needs.
type Config struct {
	DB  *DB
	Run Runner
	// Dir holds jobs/<job>/: the unpacked bundle and serve.log.
	Dir string
	// ResultsDir is where jobs' results land (RESULTS/<job>/).
	ResultsDir string
	Version    string
	// JobState is a job's state in the store ("" when it has none).
	JobState func(ctx context.Context, id string) (string, error)
	// Dashboard is the live dashboard of a job the server runs: the
	// coordinator's URL with its viewer token, which the server proxies.
	Dashboard func(ctx context.Context, id string) (string, error)
	Log       *slog.Logger
	Clock     clock.Clock
	// Poll is how often a server whose database is shared (PostgreSQL)
	// looks for jobs no replica runs, such as those of a replica that
	// died, and how often a lease's connection is checked (default 1 s).
	Poll time.Duration
	// Busy says whether a command still holds the data dir: a replica
	// whose lease was lost may still be stopping its up, and a job is
	// taken over only once it has (nil: never busy). Asked only on a
	// shared database, whose watch queues the job again.
	Busy func() bool
}

// Server is the HTTP API and the job runner.
type Server struct {
	cfg   Config
	mu    sync.Mutex
	jobs  map[string]*jobRun
	queue chan string
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

// jobRun is a job the server knows, with its log of output frames.
type jobRun struct {
	row JobRow
	log *frameLog
	// cancel stops its up (the nodes are kept: a later up --resume, or
	// down, takes over); nil while it does not run.
	cancel context.CancelFunc
	done   chan struct{} // closed when its up returns
	// downing: down took the job over; the runner leaves it.
	downing bool
	// queued: it waits in the runner's queue.
	queued bool
}

// New makes a server; Start starts its job runner.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Wall{}
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	return &Server{cfg: cfg, jobs: map[string]*jobRun{}, queue: make(chan string, 1024)}
}

// Start loads the server's jobs and runs, one at a time, those not ended:
// a job that was running when the server stopped (or was killed) is
// resumed, its agents coming back to its coordinator's old address.
func (s *Server) Start(ctx context.Context) error {
	s.ctx, s.stop = context.WithCancel(context.WithoutCancel(ctx))
	rows, err := s.cfg.DB.Jobs(ctx)
	if err != nil {
		return err
	}
	for _, row := range rows {
		jr, err := s.open(row)
		if err != nil {
			return err
		}
		if row.State != JobEnded {
			s.enqueue(jr)
		}
	}
	s.wg.Add(1)
	go s.runner()
	if s.cfg.DB.Shared() {
		s.wg.Add(1)
		go s.watch()
	}
	return nil
}

// enqueue queues a job for the runner, unless it is queued or runs here.
func (s *Server) enqueue(jr *jobRun) {
	s.mu.Lock()
	if jr.queued || jr.cancel != nil || jr.downing {
		s.mu.Unlock()
		return
	}
	jr.queued = true
	s.mu.Unlock()
	if !s.cfg.DB.Shared() {
		s.queue <- jr.row.ID
		return
	}
	select {
	case s.queue <- jr.row.ID:
	default: // full: the watch queues it again later
		s.mu.Lock()
		jr.queued = false
		s.mu.Unlock()
	}
}

// watch, on a database other replicas share, looks at the jobs every
// Poll: it learns those submitted to another replica and those another
// one ended, and queues every job not ended, so that the runner takes
// over a job whose replica died (its lease is free) within a Poll.
func (s *Server) watch() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		rows, err := s.cfg.DB.Jobs(s.ctx)
		if err != nil {
			s.cfg.Log.Error("looking for jobs", "err", err)
			continue
		}
		for _, row := range rows {
			s.learn(row)
		}
	}
}

// learn takes in a job's row as the shared database has it: a job new to
// this replica is opened, one another replica ends while this one runs it
// is stopped here, and one not ended is queued.
func (s *Server) learn(row JobRow) {
	jr := s.job(row.ID)
	if jr != nil && jr.log == nil {
		return // being submitted here
	}
	if jr == nil {
		var err error
		if jr, err = s.open(row); err != nil {
			s.cfg.Log.Error("opening a job's log", "job", row.ID, "err", err)
			return
		}
	}
	s.mu.Lock()
	if jr.cancel == nil {
		jr.row.State, jr.row.ExitCode = row.State, row.ExitCode
	}
	stop := row.State == JobDowning && jr.cancel != nil && !jr.downing
	cancel := jr.cancel
	if stop {
		jr.downing = true
	}
	s.mu.Unlock()
	if stop {
		// Another replica ends it: the up stops, keeping the nodes, and
		// lets the job's lease go to that one. Said before the up is
		// cancelled: once it ends, that replica's down may write its exit
		// frame, and a client following the log stops there.
		jr.log.Frame(frame{Err: fmt.Sprintf("server: job %s is being ended from another replica: its up here stops\n", row.ID)})
		cancel()
	}
	if row.State != JobEnded && row.State != JobDowning {
		s.enqueue(jr)
	}
}

// lease takes the leases a job runs under: the data dir's runner (it has
// one writer at a time, whichever replica) and the job's own. ok is false
// when another replica holds one of them.
func (s *Server) lease(id string) (leases []*Lease, ok bool) {
	for _, name := range []string{"runner", "job:" + id} {
		l, ok, err := s.cfg.DB.TryLease(s.ctx, name, s.cfg.Poll)
		if err != nil {
			s.cfg.Log.Error("taking a lease", "lease", name, "err", err)
		}
		if !ok {
			for _, l := range leases {
				l.Release()
			}
			return nil, false
		}
		leases = append(leases, l)
	}
	return leases, true
}

// Stop stops the job runner: a running up is cut off with its nodes kept,
// to be resumed when the server starts again.
func (s *Server) Stop() {
	if s.stop == nil {
		return
	}
	s.stop()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, jr := range s.jobs {
		jr.log.Close()
	}
}

func (s *Server) open(row JobRow) (*jobRun, error) {
	l, err := openFrameLog(filepath.Join(s.cfg.Dir, "jobs", row.ID, "serve.log"))
	if err != nil {
		return nil, err
	}
	jr := &jobRun{row: row, log: l}
	s.mu.Lock()
	s.jobs[row.ID] = jr
	s.mu.Unlock()
	return jr, nil
}

func (s *Server) job(id string) *jobRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs[id]
}

// runner runs the queued jobs one after the other: the data dir has one
// writer at a time, as it has for ups in terminals.
func (s *Server) runner() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case id := <-s.queue:
			s.runJob(id)
		}
	}
}

func (s *Server) runJob(id string) {
	jr := s.job(id)
	if jr == nil {
		return
	}
	s.mu.Lock()
	jr.queued = false
	if jr.downing || jr.cancel != nil || s.ctx.Err() != nil {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	leases, ok := s.claim(jr)
	if !ok {
		return // another replica runs it, or it is not to run; the watch asks again
	}
	defer func() {
		for _, l := range leases {
			l.Release()
		}
	}()
	s.mu.Lock()
	if jr.downing {
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	jr.cancel, jr.done = cancel, make(chan struct{})
	s.mu.Unlock()
	defer func() {
		cancel()
		s.mu.Lock()
		jr.cancel = nil
		close(jr.done)
		s.mu.Unlock()
	}()
	lost := s.stopOnLoss(ctx, cancel, leases, id)
	state, err := s.cfg.JobState(ctx, id)
	if err != nil {
		jr.log.Frame(frame{Err: fmt.Sprintf("server: reading job %s: %v\n", id, err)})
		s.end(jr, 1)
		return
	}
	args := []string{"up", filepath.Join(jr.row.Dir, TaskName), "--job-id", id}
	switch state {
	case "":
	case "done":
		s.end(jr, 0)
		return
	default:
		args = []string{"up", "--resume", id}
		jr.log.Frame(frame{Err: fmt.Sprintf("server: job %s was %s when the server running it stopped: resuming it\n", id, state)})
	}
	// Cut off (server stopping, or down taking over), the up keeps the
	// nodes: they are resumed or ended by down.
	args = append(args, "--results", s.cfg.ResultsDir, "--on-interrupt", "keep")
	if jr.row.JSON {
		args = append(args, "--json")
	}
	if err := s.cfg.DB.SetJobState(ctx, id, JobRunning, 0); err != nil {
		s.cfg.Log.Error("recording a job's state", "job", id, "err", err)
	}
	code := s.cfg.Run(ctx, args, jr.log.Writer("out"), jr.log.Writer("err"))
	s.mu.Lock()
	downing := jr.downing
	s.mu.Unlock()
	select {
	case <-lost:
		return // the replica holding the lease now resumes it
	default:
	}
	if s.ctx.Err() != nil || downing {
		return // resumed on the next start, or ended by down
	}
	s.end(jr, code)
}

// claim takes the leases a job runs under and checks, on a shared
// database, that it is still to run here: no replica ended it, and the
// data dir is free. Then its log is read again, as another replica may
// have written it. ok false: the job is left (the leases given back).
func (s *Server) claim(jr *jobRun) (leases []*Lease, ok bool) {
	id := jr.row.ID
	leases, ok = s.lease(id)
	if !ok || !s.cfg.DB.Shared() {
		return leases, ok
	}
	release := func() ([]*Lease, bool) {
		for _, l := range leases {
			l.Release()
		}
		return nil, false
	}
	if s.cfg.Busy != nil && s.cfg.Busy() {
		return release()
	}
	row, found, err := s.cfg.DB.Job(s.ctx, id)
	if err != nil || !found || row.State == JobEnded || row.State == JobDowning {
		return release()
	}
	if err := jr.log.Reload(); err != nil {
		s.cfg.Log.Error("reading a job's log", "job", id, "err", err)
		return release()
	}
	return leases, true
}

// stopOnLoss cancels a job's up when one of its leases is lost (the
// connection holding it broke: another replica may hold it now), keeping
// the nodes for that one to resume; the channel it returns is closed then.
func (s *Server) stopOnLoss(ctx context.Context, cancel context.CancelFunc, leases []*Lease, id string) <-chan struct{} {
	lost := make(chan struct{})
	var once sync.Once
	for _, l := range leases {
		go func() {
			select {
			case <-l.Lost():
				once.Do(func() {
					s.cfg.Log.Error("lost a job's lease (the database connection broke): stopping its up", "job", id)
					close(lost)
					cancel()
				})
			case <-ctx.Done():
			}
		}()
	}
	return lost
}

// end records that a job's up (or down) is over, with its exit code, and
// tells its followers.
func (s *Server) end(jr *jobRun, code int) {
	if err := s.cfg.DB.SetJobState(context.WithoutCancel(s.ctx), jr.row.ID, JobEnded, code); err != nil {
		s.cfg.Log.Error("recording a job's end", "job", jr.row.ID, "err", err)
	}
	s.mu.Lock()
	jr.row.State, jr.row.ExitCode = JobEnded, code
	s.mu.Unlock()
	jr.log.Frame(frame{Exit: &code})
}

// Handler is the server's HTTP API:
//
//	GET  /v1/version                  the server's version (no token needed)
//	GET  /v1/whoami                   the caller's identity
//	POST /v1/jobs?name=N[&json=1]     submit a job bundle (operator)
//	GET  /v1/jobs                     the server's jobs
//	GET  /v1/jobs/{id}/follow?offset= a job's output frames, as they come
//	GET  /v1/jobs/{id}/results        a job's results directory, a gzip'd tar
//	POST /v1/run                      run a command ({"args": [...]}), its output as frames
//	GET  /v1/audit                    the audit log (operator)
//	GET  /dashboard/{id}/?token=T     a job's live dashboard, then served from /
//
// Output frames are JSON lines: {"out": text}, {"err": text}, and last
// {"exit": code}.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": s.cfg.Version})
	})
	mux.HandleFunc("GET /v1/whoami", s.authed(func(w http.ResponseWriter, r *http.Request, who Identity) {
		writeJSON(w, http.StatusOK, who)
	}))
	mux.HandleFunc("POST /v1/jobs", s.authed(s.submit))
	mux.HandleFunc("GET /v1/jobs", s.authed(func(w http.ResponseWriter, r *http.Request, who Identity) {
		rows, err := s.cfg.DB.Jobs(r.Context())
		if err != nil {
			s.fail(w, http.StatusInternalServerError, "internal", err)
			return
		}
		if rows == nil {
			rows = []JobRow{}
		}
		writeJSON(w, http.StatusOK, rows)
	}))
	mux.HandleFunc("GET /v1/jobs/{id}/follow", s.authed(s.follow))
	mux.HandleFunc("GET /v1/jobs/{id}/results", s.authed(s.results))
	mux.HandleFunc("POST /v1/run", s.authed(s.run))
	mux.HandleFunc("GET /v1/audit", s.authed(func(w http.ResponseWriter, r *http.Request, who Identity) {
		if !s.permit(w, r, who, "audit", "") {
			return
		}
		log, err := s.cfg.DB.AuditLog(r.Context())
		if err != nil {
			s.fail(w, http.StatusInternalServerError, "internal", err)
			return
		}
		writeJSON(w, http.StatusOK, log)
	}))
	mux.HandleFunc("GET /dashboard/{id}/", s.dashboard)
	mux.HandleFunc("/", s.proxyDashboard)
	return mux
}

// apiError is every error's body.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) fail(w http.ResponseWriter, status int, code string, err error) {
	if status >= 500 {
		s.cfg.Log.Error("request failed", "err", err)
		err = errors.New("the server failed: see its log")
	}
	writeJSON(w, status, apiError{Error: err.Error(), Code: code})
}

// authed checks the client's version and its token, then hands the
// request to h with the identity the token names. Who the caller is comes
// from the credential only, never from what it sends.
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, Identity)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get(HeaderVersion); v != s.cfg.Version {
			if v == "" {
				v = "unknown"
			}
			s.fail(w, http.StatusBadRequest, "version", fmt.Errorf("version mismatch: this server is vastfleet %s, the client is %s; use a vastfleet %s client", s.cfg.Version, v, s.cfg.Version))
			return
		}
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		who, err := s.cfg.DB.Authenticate(r.Context(), strings.TrimSpace(tok))
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vastfleet"`)
			if errors.Is(err, ErrNoToken) || errors.Is(err, ErrUnknownToken) || errors.Is(err, ErrRevoked) || errors.Is(err, ErrExpired) {
				s.fail(w, http.StatusUnauthorized, "unauthorized", err)
				return
			}
			s.unavailable(w, err)
			return
		}
		h(w, r, who)
	}
}

// unavailable answers a request the server cannot take because its
// database does not answer: 503, and no new work is accepted (nothing is
// queued, nothing acknowledged) until it does.
func (s *Server) unavailable(w http.ResponseWriter, err error) {
	s.cfg.Log.Error("the server's database does not answer", "err", err)
	w.Header().Set("Retry-After", "10")
	writeJSON(w, http.StatusServiceUnavailable, apiError{Code: "unavailable",
		Error: "the server's database does not answer, so it takes no new work until it does (its log says why); nothing already accepted is lost"})
}

// permit says whether who may do action; a refusal is answered (403) and
// audited.
func (s *Server) permit(w http.ResponseWriter, r *http.Request, who Identity, action, target string) bool {
	if allowed(who.Role, action) {
		return true
	}
	s.audit(r.Context(), who, action, target, "denied")
	s.fail(w, http.StatusForbidden, "forbidden", fmt.Errorf("%w: role %s may not %s (an operator token may)", ErrForbidden, who.Role, action))
	return false
}

func (s *Server) audit(ctx context.Context, who Identity, action, target, outcome string) {
	if err := s.cfg.DB.Audit(context.WithoutCancel(ctx), who, action, target, outcome); err != nil {
		s.cfg.Log.Error("writing the audit log", "err", err)
	}
}

var jobName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidJobName reports whether s is a job's name as the server makes
// them (never a path).
func ValidJobName(s string) bool { return jobName.MatchString(s) }

// submit takes a job bundle, unpacks it and queues the job.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, who Identity) {
	name := r.URL.Query().Get("name")
	if name == "" {
		name = "job"
	}
	if !s.permit(w, r, who, ActionSubmit, name) {
		return
	}
	if !jobName.MatchString(name) {
		s.fail(w, http.StatusBadRequest, "bad_request", fmt.Errorf("job name %q: letters, digits, '.', '_' and '-'", name))
		return
	}
	id := name + "-" + s.cfg.Clock.Now().UTC().Format("20060102-150405")
	s.mu.Lock()
	for n := 2; s.jobs[id] != nil; n++ {
		id = fmt.Sprintf("%s-%s-%d", name, s.cfg.Clock.Now().UTC().Format("20060102-150405"), n)
	}
	s.jobs[id] = &jobRun{} // reserved
	s.mu.Unlock()
	row := JobRow{ID: id, Dir: filepath.Join(s.cfg.Dir, "jobs", id, "bundle"), Task: TaskName, SubmittedBy: who.Name,
		JSON: r.URL.Query().Get("json") == "1", State: JobQueued}
	err := Unpack(http.MaxBytesReader(w, r.Body, MaxBundle), row.Dir)
	if err == nil {
		err = s.cfg.DB.AddJob(r.Context(), row)
	}
	var jr *jobRun
	if err == nil {
		jr, err = s.open(row)
	}
	if err != nil {
		s.mu.Lock()
		delete(s.jobs, id)
		s.mu.Unlock()
		os.RemoveAll(filepath.Join(s.cfg.Dir, "jobs", id))
		s.audit(r.Context(), who, ActionSubmit, id, "failed: "+err.Error())
		s.fail(w, http.StatusBadRequest, "bad_request", err)
		return
	}
	jr.log.Frame(frame{Err: fmt.Sprintf("server: job %s submitted by %s; queued\n", id, who.Name)})
	s.audit(r.Context(), who, ActionSubmit, id, "queued")
	s.enqueue(jr)
	writeJSON(w, http.StatusAccepted, map[string]string{"job": id})
}

// runRequest is POST /v1/run's body.
type runRequest struct {
	Args []string `json:"args"`
}

// run runs one command for the client and streams its output.
func (s *Server) run(w http.ResponseWriter, r *http.Request, who Identity) {
	var req runRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || len(req.Args) == 0 {
		s.fail(w, http.StatusBadRequest, "bad_request", fmt.Errorf("want {\"args\": [COMMAND, ARG...]}"))
		return
	}
	op, args := req.Args[0], req.Args[1:]
	target := strings.Join(args, " ")
	if _, known := Ops[op]; known && !s.permit(w, r, who, op, target) {
		return
	}
	if err := checkArgs(op, args); err != nil {
		s.fail(w, http.StatusBadRequest, "bad_request", err)
		return
	}
	if op == "down" && len(args) > 0 {
		if jr := s.job(firstPositional(args)); jr != nil && jr.log != nil {
			s.downServerJob(w, r, who, jr, args)
			return
		}
	}
	if op == "status" && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--jq") }) && s.queued(r.Context(), firstPositional(args)) {
		// Submitted, and its up has not recorded it yet.
		fw := newStreamWriter(w)
		id, code := firstPositional(args), 0
		if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--json") }) {
			b, _ := json.Marshal([]map[string]any{{"id": id, "state": JobQueued, "up_running": false}})
			fw.Frame(frame{Out: string(b) + "\n"})
		} else {
			fw.Frame(frame{Out: fmt.Sprintf("%s\tqueued on the server: it starts once the job before it is done\n", id)})
		}
		fw.Frame(frame{Exit: &code})
		return
	}
	fw := newStreamWriter(w)
	code := s.cfg.Run(r.Context(), req.Args, fw.Writer("out"), fw.Writer("err"))
	fw.Frame(frame{Exit: &code})
	if Ops[op].Role == RoleOperator {
		s.audit(r.Context(), who, op, target, "exit "+strconv.Itoa(code))
	}
}

// queued says whether id is a job the server was given whose up has not
// recorded it in the store yet.
func (s *Server) queued(ctx context.Context, id string) bool {
	jr := s.job(id)
	if id == "" || jr == nil || jr.log == nil {
		return false
	}
	s.mu.Lock()
	ended := jr.row.State == JobEnded
	s.mu.Unlock()
	if ended {
		return false
	}
	state, err := s.cfg.JobState(ctx, id)
	return err == nil && state == ""
}

func firstPositional(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// downServerJob ends a job the server runs: its up is stopped (the nodes
// kept), then down collects, destroys and reports, into the job's log,
// which the client follows.
func (s *Server) downServerJob(w http.ResponseWriter, r *http.Request, who Identity, jr *jobRun, args []string) {
	s.mu.Lock()
	if jr.row.State == JobEnded || jr.downing {
		s.mu.Unlock()
		// Its up ended (or a down runs): down as for any job.
		fw := newStreamWriter(w)
		code := s.cfg.Run(r.Context(), append([]string{"down"}, args...), fw.Writer("out"), fw.Writer("err"))
		fw.Frame(frame{Exit: &code})
		s.audit(r.Context(), who, "down", jr.row.ID, "exit "+strconv.Itoa(code))
		return
	}
	jr.downing = true
	cancel, done := jr.cancel, jr.done
	s.mu.Unlock()
	offset := jr.log.Size()
	jr.log.Frame(frame{Err: fmt.Sprintf("server: %s ends job %s\n", who.Name, jr.row.ID)})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if cancel != nil {
			cancel()
			<-done
		}
		if s.cfg.DB.Shared() {
			leases := s.handOver(jr)
			if leases == nil {
				return // stopping: the job is left downing
			}
			defer func() {
				for _, l := range leases {
					l.Release()
				}
			}()
		}
		state, _ := s.cfg.JobState(s.ctx, jr.row.ID)
		code := 0
		if state != "" {
			code = s.cfg.Run(context.WithoutCancel(s.ctx), append([]string{"down"}, args...), jr.log.Writer("out"), jr.log.Writer("err"))
		} else {
			jr.log.Frame(frame{Err: fmt.Sprintf("server: job %s had not started: removed, nothing was rented\n", jr.row.ID)})
		}
		s.audit(s.ctx, who, "down", jr.row.ID, "exit "+strconv.Itoa(code))
		s.end(jr, code)
	}()
	s.stream(w, r, jr, offset)
}

// handOver, on a shared database, takes a job to end from whichever
// replica runs it: the job is marked downing (that replica's watch stops
// its up, keeping the nodes) and its leases are taken once they are free
// and the data dir is, so that down never runs beside its up. nil when
// this server stops first.
func (s *Server) handOver(jr *jobRun) []*Lease {
	if err := s.cfg.DB.SetJobState(s.ctx, jr.row.ID, JobDowning, 0); err != nil {
		s.cfg.Log.Error("recording a job's state", "job", jr.row.ID, "err", err)
	}
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		if leases, ok := s.lease(jr.row.ID); ok {
			if s.cfg.Busy == nil || !s.cfg.Busy() {
				return leases
			}
			for _, l := range leases {
				l.Release()
			}
		}
		select {
		case <-s.ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// follow streams a job's output frames from an offset until its exit
// frame; a client cut off (the server restarted) follows again from where
// it was.
func (s *Server) follow(w http.ResponseWriter, r *http.Request, who Identity) {
	jr := s.job(r.PathValue("id"))
	if jr == nil || jr.log == nil {
		s.fail(w, http.StatusNotFound, "not_found", fmt.Errorf("the server has no job %q (`vastfleet status` lists jobs)", r.PathValue("id")))
		return
	}
	offset, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	s.stream(w, r, jr, offset)
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, jr *jobRun, offset int64) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flush := func() {}
	if f, ok := w.(http.Flusher); ok {
		flush = f.Flush
	}
	flush()
	for {
		changed := jr.log.Changed()
		b, ended, err := jr.log.ReadFrom(offset)
		if err != nil {
			return
		}
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return
			}
			flush()
			offset += int64(len(b))
		}
		if ended {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case <-changed:
		case <-time.After(5 * time.Second):
		}
	}
}

// Cookies of the dashboard the server serves: the job whose dashboard
// this browser views, and the server token it was opened with (checked on
// every request, so a revoked token loses the dashboard too).
const (
	dashJobCookie   = "vastfleet_dash_job"
	dashTokenCookie = "vastfleet_dash_token"
)

// dashboardPaths are the coordinator's dashboard paths the server passes
// on (GET only): the page, its static files, and the viewer's API.
var dashboardPaths = []string{"/", "/api/v1/state", "/api/v1/events", "/api/v1/history", "/api/v1/depth.svg"}

// dashboard opens a job's live dashboard for a viewer or operator token,
// given as the token query parameter (a browser link) or a bearer header:
// the browser is sent to the job's coordinator's dashboard, which the
// server then serves from its own address (the coordinator listens on
// loopback).
func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok == "" {
		tok = r.URL.Query().Get("token")
	}
	who, err := s.cfg.DB.Authenticate(r.Context(), strings.TrimSpace(tok))
	if err != nil {
		s.fail(w, http.StatusUnauthorized, "unauthorized", err)
		return
	}
	id := r.PathValue("id")
	_, viewer, err := s.coordDashboard(r.Context(), id)
	if err != nil {
		s.fail(w, http.StatusNotFound, "not_found", err)
		return
	}
	s.audit(r.Context(), who, "dashboard", id, "opened")
	secure := r.TLS != nil
	for _, c := range []*http.Cookie{{Name: dashJobCookie, Value: id}, {Name: dashTokenCookie, Value: strings.TrimSpace(tok)}} {
		c.Path, c.HttpOnly, c.Secure, c.SameSite = "/", true, secure, http.SameSiteStrictMode
		http.SetCookie(w, c)
	}
	http.Redirect(w, r, "/?token="+url.QueryEscape(viewer), http.StatusSeeOther)
}

// coordDashboard is where a job's coordinator serves its dashboard and
// the job's viewer token there. Only a coordinator on plain-HTTP loopback
// is served through; one on TLS is reached at its own address.
func (s *Server) coordDashboard(ctx context.Context, id string) (*url.URL, string, error) {
	if s.cfg.Dashboard == nil {
		return nil, "", errors.New("no dashboard")
	}
	link, err := s.cfg.Dashboard(ctx, id)
	if err != nil {
		return nil, "", err
	}
	u, err := url.Parse(link)
	if err != nil {
		return nil, "", err
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); u.Scheme != "http" || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
		return nil, "", fmt.Errorf("job %s's dashboard is at its coordinator's own address: %s", id, link)
	}
	viewer := u.Query().Get("token")
	u.RawQuery, u.Path = "", ""
	return u, viewer, nil
}

// proxyDashboard passes a dashboard request on to the coordinator of the
// job the browser opened, once the server token it was opened with still
// stands.
func (s *Server) proxyDashboard(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !(slices.Contains(dashboardPaths, r.URL.Path) || strings.HasPrefix(r.URL.Path, "/static/")) {
		s.fail(w, http.StatusNotFound, "not_found", errors.New("no such path (the API is under /v1/, a job's dashboard at /dashboard/JOB/?token=TOKEN)"))
		return
	}
	jc, err1 := r.Cookie(dashJobCookie)
	tc, err2 := r.Cookie(dashTokenCookie)
	if err1 != nil || err2 != nil {
		s.fail(w, http.StatusUnauthorized, "unauthorized", errors.New("open a job's dashboard with /dashboard/JOB/?token=TOKEN"))
		return
	}
	if _, err := s.cfg.DB.Authenticate(r.Context(), tc.Value); err != nil {
		s.fail(w, http.StatusUnauthorized, "unauthorized", err)
		return
	}
	target, _, err := s.coordDashboard(r.Context(), jc.Value)
	if err != nil {
		s.fail(w, http.StatusNotFound, "not_found", err)
		return
	}
	p := httputil.NewSingleHostReverseProxy(target)
	p.FlushInterval = -1 // the event stream, as it comes
	p.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		s.fail(w, http.StatusBadGateway, "bad_gateway", fmt.Errorf("job %s's coordinator does not answer (the job is not running?)", jc.Value))
	}
	// The server's own cookies stay here.
	r = r.Clone(r.Context())
	var keep []string
	for _, c := range r.Cookies() {
		if c.Name != dashJobCookie && c.Name != dashTokenCookie {
			keep = append(keep, c.String())
		}
	}
	r.Header.Del("Cookie")
	if len(keep) > 0 {
		r.Header.Set("Cookie", strings.Join(keep, "; "))
	}
	p.ServeHTTP(w, r)
}
