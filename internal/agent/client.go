package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// requestTimeout bounds one call to the coordinator; the loops retry.
const requestTimeout = 20 * time.Second

// coordClient posts to the coordinator with the fleet's agent token.
type coordClient struct {
	base  string
	token string
	http  *http.Client
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
		tr.TLSClientConfig = pinnedTLS(cfg.fingerprintBytes())
	}
	return &coordClient{base: cfg.CoordURL, token: cfg.Token, http: &http.Client{Transport: tr}}
}

// pinnedTLS accepts exactly the certificate whose DER hashes to want, and
// nothing else: not a CA-signed one for the same name, not an expired
// or renamed one. The coordinator's certificate is self-signed, so chain
// and name checks have nothing to add; VerifyConnection runs on every
// handshake, resumed ones included.
func pinnedTLS(want []byte) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by the pin below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("coordinator presented no certificate")
			}
			got := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(got[:], want) != 1 {
				return fmt.Errorf("coordinator certificate sha256 %s does not match the pinned %s", hex.EncodeToString(got[:]), hex.EncodeToString(want))
			}
			return nil
		},
	}
}

// post sends in as JSON to path and decodes a 2xx answer into out.
func (c *coordClient) post(ctx context.Context, path string, in, out any) error {
	_, err := c.postStatus(ctx, path, in, out)
	return err
}

// postStatus is post that also says which 2xx status came back; a 204
// leaves out as it was.
func (c *coordClient) postStatus(ctx context.Context, path string, in, out any) (int, error) {
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
	req.Header.Set("Authorization", "Bearer "+c.token)
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

func (c *coordClient) close() { c.http.CloseIdleConnections() }
