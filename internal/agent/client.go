package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/certpin"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// requestTimeout bounds one call to the coordinator; the loops retry.
const requestTimeout = 20 * time.Second

// coordClient posts to the coordinator. With an instance id it first
// trades the fleet's bootstrap token for this instance's own credential
// (once: the credential is kept in the state directory, as the
// coordinator enrolls an instance only once) and sends everything with
// that; without one (tests, a credential handed over by other means) it
// uses the token it was given.
type coordClient struct {
	base  string
	token string
	http  *http.Client

	enrollMu sync.Mutex
	enroll   *enrollment // nil once enrolled, or when not enrolling
	// advertised is what the coordinator said the marketplace lists for
	// this instance's machine, when it said so at enrollment.
	advertised *wire.Capacity
}

// enrollment is what the client needs to enroll, and where it keeps the
// credential.
type enrollment struct {
	req  wire.EnrollRequest
	path string
	log  *slog.Logger
}

// savedCredential is the credential file (0600).
type savedCredential struct {
	Coord      string         `json:"coord"`
	Fleet      string         `json:"fleet"`
	InstanceID int64          `json:"instance_id"`
	Node       string         `json:"node"`
	Token      string         `json:"token"`
	Advertised *wire.Capacity `json:"advertised,omitempty"`
}

// credentialFile is where the credential is kept in the state directory.
const credentialFile = "credential.json"

// ensureEnrolled enrolls unless the client already has a credential: the
// saved one, or a new one from the coordinator.
func (c *coordClient) ensureEnrolled(ctx context.Context) error {
	c.enrollMu.Lock()
	defer c.enrollMu.Unlock()
	e := c.enroll
	if e == nil {
		return nil
	}
	if b, err := os.ReadFile(e.path); err == nil {
		var sc savedCredential
		if json.Unmarshal(b, &sc) == nil && sc.Coord == c.base && sc.Fleet == e.req.Fleet &&
			sc.InstanceID == e.req.InstanceID && sc.Node == e.req.Node && sc.Token != "" {
			c.token, c.enroll, c.advertised = sc.Token, nil, sc.Advertised
			return nil
		}
	}
	var reply wire.EnrollReply
	if _, err := c.send(ctx, wire.PathEnroll, c.token, e.req, &reply); err != nil {
		return fmt.Errorf("enrolling instance %d: %w", e.req.InstanceID, err)
	}
	if reply.Token == "" || reply.Node != e.req.Node {
		return fmt.Errorf("enrolling instance %d: the coordinator answered node %q without a credential or under another name", e.req.InstanceID, reply.Node)
	}
	b, _ := json.Marshal(savedCredential{Coord: c.base, Fleet: e.req.Fleet, InstanceID: e.req.InstanceID, Node: reply.Node, Token: reply.Token, Advertised: reply.Advertised})
	tmp := e.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("saving the credential: %w", err)
	}
	if err := os.Rename(tmp, e.path); err != nil {
		return fmt.Errorf("saving the credential: %w", err)
	}
	e.log.Info("enrolled: reporting with this instance's own credential", "instance", e.req.InstanceID)
	c.token, c.enroll, c.advertised = reply.Token, nil, reply.Advertised
	return nil
}

// enrollRetry spaces enrollments that failed while the probe waits for
// its figures.
const enrollRetry = 2 * time.Second

// listedCapacity enrolls (when the client enrolls at all) and returns what
// the coordinator said the marketplace lists for this machine; nil when
// it said nothing or enrollment failed within ctx.
func (c *coordClient) listedCapacity(ctx context.Context) *wire.Capacity {
	// An instance may enroll before its launch has recorded it, and is
	// refused until then: try again until ctx ends.
	for c.ensureEnrolled(ctx) != nil {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(enrollRetry):
		}
	}
	c.enrollMu.Lock()
	defer c.enrollMu.Unlock()
	return c.advertised
}

// statusError is a non-2xx answer.
type statusError struct {
	Status int
	Msg    string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("coordinator answered %d: %s", e.Status, e.Msg)
}

func newCoordClient(cfg Config) *coordClient {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 15 * time.Second,
		MaxIdleConns:        2,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false, // one small request at a time: HTTP/1.1 costs less memory
	}
	if cfg.Fingerprint != "" {
		tr.TLSClientConfig = certpin.TLSConfig(cfg.Fingerprint)
	}
	c := &coordClient{base: cfg.CoordURL, token: cfg.Token, http: &http.Client{Transport: tr}}
	if cfg.InstanceID != 0 {
		c.enroll = &enrollment{
			req:  wire.EnrollRequest{Fleet: cfg.Fleet, InstanceID: cfg.InstanceID, Node: cfg.Node},
			path: filepath.Join(cfg.StateDir, credentialFile),
			log:  slog.New(slog.DiscardHandler),
		}
	}
	return c
}

// post sends in as JSON to path and decodes a 2xx answer into out.
func (c *coordClient) post(ctx context.Context, path string, in, out any) error {
	_, err := c.postStatus(ctx, path, in, out)
	return err
}

// postStatus is post that also says which 2xx status came back; a 204
// leaves out as it was.
func (c *coordClient) postStatus(ctx context.Context, path string, in, out any) (int, error) {
	if err := c.ensureEnrolled(ctx); err != nil {
		return 0, err
	}
	c.enrollMu.Lock()
	tok := c.token
	c.enrollMu.Unlock()
	return c.send(ctx, path, tok, in, out)
}

// send posts in with token.
func (c *coordClient) send(ctx context.Context, path, token string, in, out any) (int, error) {
	// Findings are the sessions' own JSON: sent as written, not with
	// <, > and & grown sixfold by HTML escaping.
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(in); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, &body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode/100 != 2 {
		var e wire.Error
		msg := string(bytes.TrimSpace(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		return resp.StatusCode, &statusError{Status: resp.StatusCode, Msg: msg}
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return resp.StatusCode, nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return resp.StatusCode, fmt.Errorf("coordinator answer to %s: %v", path, err)
	}
	return resp.StatusCode, nil
}

// download opens the coordinator's probe download of n bytes; ctx bounds
// the whole read, not only the answer.
func (c *coordClient) download(ctx context.Context, n int64) (io.ReadCloser, error) {
	if err := c.ensureEnrolled(ctx); err != nil {
		return nil, err
	}
	c.enrollMu.Lock()
	tok := c.token
	c.enrollMu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+wire.PathProbeBlob+"?bytes="+strconv.FormatInt(n, 10), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		var e wire.Error
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return nil, &statusError{Status: resp.StatusCode, Msg: msg}
	}
	return resp.Body, nil
}

func (c *coordClient) close() { c.http.CloseIdleConnections() }

// enrolling says whether the client enrolls with an instance's own
// credential (it does when it knows its instance).
func (c *coordClient) enrolling() bool {
	c.enrollMu.Lock()
	defer c.enrollMu.Unlock()
	return c.enroll != nil || c.advertised != nil
}
