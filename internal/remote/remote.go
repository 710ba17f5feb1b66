// Package remote is vastfleet's SSH layer: it takes targets (address, user,
// key, known host key) and runs commands on them over one reused connection
// per node. It knows nothing of the store or the marketplace; callers map
// instances to targets and keep the host keys it learns.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/clock"
)

// Target is one node to reach.
type Target struct {
	Name   string // how output and errors name the node
	Host   string
	Port   int
	User   string
	Signer ssh.Signer
	// HostKey is the key this node presented before; nil accepts the first
	// key it shows (accept-new) and reports it through Options.OnNewHostKey.
	HostKey ssh.PublicKey
}

func (t Target) addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// Options tune a Pool; zero values take the defaults in brackets.
type Options struct {
	HandshakeTimeout  time.Duration // whole dial+handshake [20s]
	KeepaliveInterval time.Duration // [30s]
	KeepaliveMisses   int           // unanswered keepalives before the connection is dropped [3]
	MaxHandshakes     int           // handshakes in flight across the pool [32]
	MaxSessions       int           // sessions at once on one connection [8]
	Jitter            time.Duration // each first connect waits a random part of this [0]
	RefusedRetries    int           // retries of a refused port (a node still booting) [5]
	// AuthRetries are retries of a refused key [3]: vast.ai's proxy says
	// "if authentication fails, try again after a few seconds", since keys
	// reach a new instance some seconds after it runs. -1: none.
	AuthRetries  int
	RetryBackoff time.Duration // first retry wait, doubling [1s]
	// OnNewHostKey is called with the key a node without a known key
	// presented; an error refuses the connection.
	OnNewHostKey func(t Target, key ssh.PublicKey) error
}

func (o Options) withDefaults() Options {
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 20 * time.Second
	}
	if o.KeepaliveInterval <= 0 {
		o.KeepaliveInterval = 30 * time.Second
	}
	if o.KeepaliveMisses <= 0 {
		o.KeepaliveMisses = 3
	}
	if o.MaxHandshakes <= 0 {
		o.MaxHandshakes = 32
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 8
	}
	if o.RefusedRetries < 0 {
		o.RefusedRetries = 0
	} else if o.RefusedRetries == 0 {
		o.RefusedRetries = 5
	}
	if o.AuthRetries < 0 {
		o.AuthRetries = 0
	} else if o.AuthRetries == 0 {
		o.AuthRetries = 3
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = time.Second
	}
	return o
}

// Pool holds one connection per node, reused by every command.
type Pool struct {
	opts       Options
	handshakes chan struct{}

	mu    sync.Mutex
	conns map[string]*Conn

	// Bytes written to and read from the nodes' sockets, SSH framing and
	// encryption included: what this process costs the uplink.
	sent, received atomic.Int64
}

// Traffic is what the pool's connections have sent and received so far,
// counted on the sockets.
func (p *Pool) Traffic() (sent, received int64) { return p.sent.Load(), p.received.Load() }

// countingConn adds a connection's bytes to its pool's totals.
type countingConn struct {
	net.Conn
	p *Pool
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.p.received.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.p.sent.Add(int64(n))
	return n, err
}

// NewPool returns an empty pool.
func NewPool(opts Options) *Pool {
	opts = opts.withDefaults()
	return &Pool{opts: opts, handshakes: make(chan struct{}, opts.MaxHandshakes), conns: map[string]*Conn{}}
}

// Conn is one node's connection.
type Conn struct {
	target   Target
	ready    chan struct{}
	err      error
	client   *ssh.Client
	hostKey  ssh.PublicKey
	sessions chan struct{}
	dead     chan struct{} // closed once the connection has ended
}

// HostKey is the key the node presented on this connection.
func (c *Conn) HostKey() ssh.PublicKey { return c.hostKey }

// Errors a caller can tell apart.
var (
	ErrHostKeyChanged = errors.New("host key changed")
	ErrAuth           = errors.New("permission denied (publickey)")
	ErrRefused        = errors.New("connection refused")
	ErrHandshakeHang  = errors.New("handshake did not finish")
)

// Error is a failure to reach one node, with what to do about it.
type Error struct {
	Target Target
	Kind   error // one of the Err values above, or nil
	Detail string
	Err    error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("ssh %s@%s (%s): ", e.Target.User, e.Target.addr(), e.Target.Name)
	if e.Kind != nil {
		s += e.Kind.Error() + ": "
	}
	if e.Detail != "" {
		return s + e.Detail
	}
	return s + e.Err.Error()
}

func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

// Fingerprint is a key's SHA256 fingerprint as OpenSSH prints it.
func Fingerprint(k ssh.PublicKey) string { return ssh.FingerprintSHA256(k) }

// Connect returns the node's connection, opening it once; concurrent
// callers share one handshake.
func (p *Pool) Connect(ctx context.Context, t Target) (*Conn, error) {
	key := t.User + "@" + t.addr()
	p.mu.Lock()
	c, ok := p.conns[key]
	if !ok {
		c = &Conn{target: t, ready: make(chan struct{}), sessions: make(chan struct{}, p.opts.MaxSessions), dead: make(chan struct{})}
		p.conns[key] = c
		p.mu.Unlock()
		c.client, c.hostKey, c.err = p.dial(ctx, t)
		if c.err != nil {
			// A failed connect is not cached: the next command tries again.
			p.mu.Lock()
			delete(p.conns, key)
			p.mu.Unlock()
		} else {
			go p.keepalive(c)
			go func() {
				c.client.Wait()
				close(c.dead)
			}()
		}
		close(c.ready)
	} else if c.ended() {
		// A dropped connection not yet reaped: dial a fresh one.
		delete(p.conns, key)
		p.mu.Unlock()
		return p.Connect(ctx, t)
	} else {
		p.mu.Unlock()
	}
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

// wall is what the SSH layer waits on: its retries pace a real network,
// so they pass in wall time whatever the marketplace's clock.
var wall clock.Wall

func (p *Pool) dial(ctx context.Context, t Target) (*ssh.Client, ssh.PublicKey, error) {
	if p.opts.Jitter > 0 {
		if err := wall.Sleep(ctx, rand.N(p.opts.Jitter)); err != nil {
			return nil, nil, err
		}
	}
	backoff := p.opts.RetryBackoff
	refused, denied := 0, 0
	for {
		cl, key, err := p.handshake(ctx, t)
		switch {
		case err == nil:
			return cl, key, nil
		case errors.Is(err, ErrRefused) && refused < p.opts.RefusedRetries:
			refused++
		case errors.Is(err, ErrAuth) && denied < p.opts.AuthRetries:
			denied++
		default:
			return cl, key, err
		}
		if err := wall.Sleep(ctx, backoff); err != nil {
			return nil, nil, err
		}
		backoff *= 2
	}
}

// handshake dials and completes the SSH handshake under one deadline: a
// host that accepts TCP and then says nothing is cut, not waited on forever.
func (p *Pool) handshake(ctx context.Context, t Target) (*ssh.Client, ssh.PublicKey, error) {
	select {
	case p.handshakes <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	defer func() { <-p.handshakes }()
	fail := func(kind error, detail string, err error) error {
		return &Error{Target: t, Kind: kind, Detail: detail, Err: err}
	}
	deadline := time.Now().Add(p.opts.HandshakeTimeout)
	hctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(hctx, "tcp", t.addr())
	if err != nil {
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return nil, nil, fail(ErrRefused, "the port refused; the instance may still be starting (retried with backoff)", err)
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case hctx.Err() != nil:
			return nil, nil, fail(ErrHandshakeHang, fmt.Sprintf("no TCP connection within %s", p.opts.HandshakeTimeout), err)
		}
		return nil, nil, fail(nil, "", err)
	}
	nc = &countingConn{Conn: nc, p: p}
	nc.SetDeadline(deadline)
	stop := context.AfterFunc(hctx, func() { nc.SetDeadline(time.Now()) })
	var learned, presented ssh.PublicKey
	cfg := &ssh.ClientConfig{
		User: t.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(t.Signer)},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			presented = key
			if t.HostKey == nil {
				learned = key
				return nil
			}
			if string(key.Marshal()) != string(t.HostKey.Marshal()) {
				return fmt.Errorf("%w: it presented %s, but %s was recorded for it; refusing (a rebuilt instance must be forgotten first)",
					ErrHostKeyChanged, Fingerprint(key), Fingerprint(t.HostKey))
			}
			return nil
		},
		Timeout: p.opts.HandshakeTimeout,
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, t.addr(), cfg)
	stop()
	if err != nil {
		nc.Close()
		var ne net.Error
		switch {
		case errors.Is(err, ErrHostKeyChanged):
			return nil, nil, fail(ErrHostKeyChanged, err.Error(), err)
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case hctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()):
			return nil, nil, fail(ErrHandshakeHang, fmt.Sprintf("the host accepted the connection but the SSH handshake did not finish within %s", p.opts.HandshakeTimeout), err)
		case isAuthFailure(err):
			return nil, nil, fail(ErrAuth, fmt.Sprintf("the key offered (%s) is not on the instance; attach it to the instance, or recreate the instance", Fingerprint(t.Signer.PublicKey())), err)
		case errors.Is(err, io.EOF):
			// Closed during the handshake: vast's proxy and booting sshd both do this.
			return nil, nil, fail(ErrRefused, "the host closed the connection during the handshake; the instance may still be starting", err)
		}
		return nil, nil, fail(nil, "", err)
	}
	nc.SetDeadline(time.Time{})
	if learned != nil && p.opts.OnNewHostKey != nil {
		if err := p.opts.OnNewHostKey(t, learned); err != nil {
			sc.Close()
			return nil, nil, fail(nil, "", err)
		}
	}
	return ssh.NewClient(sc, chans, reqs), presented, nil
}

func isAuthFailure(err error) bool {
	s := err.Error()
	return strings.Contains(s, "unable to authenticate") || strings.Contains(s, "no supported methods remain")
}

// keepalive drops a connection whose peer stopped answering, so that the
// next command reconnects instead of hanging on a dead TCP stream.
func (p *Pool) keepalive(c *Conn) {
	misses := 0
	t := time.NewTicker(p.opts.KeepaliveInterval)
	defer t.Stop()
	for range t.C {
		answered := make(chan error, 1)
		go func() {
			_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
			answered <- err
		}()
		select {
		case err := <-answered:
			if err != nil {
				p.drop(c)
				return
			}
			misses = 0
		case <-time.After(p.opts.KeepaliveInterval):
			if misses++; misses >= p.opts.KeepaliveMisses {
				p.drop(c)
				return
			}
		}
	}
}

func (p *Pool) drop(c *Conn) {
	p.mu.Lock()
	key := c.target.User + "@" + c.target.addr()
	if p.conns[key] == c {
		delete(p.conns, key)
	}
	p.mu.Unlock()
	c.client.Close()
}

// Close closes every connection.
func (p *Pool) Close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[string]*Conn{}
	p.mu.Unlock()
	for _, c := range conns {
		<-c.ready
		if c.client != nil {
			c.client.Close()
		}
	}
	return nil
}

// ended reports whether c was opened and has since ended.
func (c *Conn) ended() bool {
	select {
	case <-c.ready:
		return c.err == nil && c.closed()
	default:
		return false
	}
}

// closed reports whether the connection has ended.
func (c *Conn) closed() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

// Client is the underlying SSH client (for SFTP and port forwards).
func (c *Conn) Client() *ssh.Client { return c.client }

// Run runs cmd through the remote shell and returns its exit status. A
// command killed by a signal reports 128+signal as a shell would; ctx
// cancelled sends SIGTERM and closes the session.
func (c *Conn) Run(ctx context.Context, cmd string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	select {
	case c.sessions <- struct{}{}:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	defer func() { <-c.sessions }()
	s, err := c.client.NewSession()
	if err != nil {
		return -1, fmt.Errorf("ssh %s: new session: %w", c.target.Name, err)
	}
	defer s.Close()
	// Output is copied by two goroutines; callers often pass one writer
	// for both, so writes are serialized.
	var mu sync.Mutex
	s.Stdin = stdin
	if stdout != nil {
		s.Stdout = &lockedWriter{mu: &mu, w: stdout}
	}
	if stderr != nil {
		s.Stderr = &lockedWriter{mu: &mu, w: stderr}
	}
	if err := s.Start(cmd); err != nil {
		return -1, fmt.Errorf("ssh %s: start: %w", c.target.Name, err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		s.Signal(ssh.SIGTERM)
		s.Close()
		<-done
		return -1, ctx.Err()
	}
	return ExitStatus(err)
}

// ExitStatus turns a session's Wait error into an exit code; err is
// non-nil only when no status came back (the connection broke).
func ExitStatus(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		if ee.Signal() != "" && ee.ExitStatus() == 0 {
			return 128 + signalNumber(ee.Signal()), nil
		}
		return ee.ExitStatus(), nil
	}
	var missing *ssh.ExitMissingError
	if errors.As(err, &missing) {
		return -1, fmt.Errorf("the connection closed before the command reported an exit status: %w", err)
	}
	return -1, err
}

func signalNumber(sig string) int {
	switch ssh.Signal(sig) {
	case ssh.SIGHUP:
		return 1
	case ssh.SIGINT:
		return 2
	case ssh.SIGKILL:
		return 9
	case ssh.SIGTERM:
		return 15
	}
	return 0
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
