package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/certpin"
	"github.com/vastfleet/vastfleet/internal/clock"
)

// Client talks to a vastfleet server.
type Client struct {
	URL     string
	Token   string
	Version string
	// Pin is the server certificate's hex sha256, for a server with a
	// self-signed certificate (serve --tls prints it).
	Pin   string
	HTTP  *http.Client
	Clock clock.Clock
	// Reconnect bounds how long Follow keeps trying to reach a server
	// that went away (restarting) [2m].
	Reconnect time.Duration
}

// APIError is the server's refusal: its status and message.
type APIError struct {
	Status int
	Code   string
	Msg    string
}

func (e *APIError) Error() string { return e.Msg }

// Is makes a 403 ErrForbidden for errors.Is.
func (e *APIError) Is(target error) bool {
	return target == ErrForbidden && e.Status == http.StatusForbidden
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	if c.Pin != "" {
		t.TLSClientConfig = certpin.TLSConfig(c.Pin)
	} else {
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	c.HTTP = &http.Client{Transport: t}
	return c.HTTP
}

func (c *Client) do(ctx context.Context, method, path string, body io.Reader, ctype string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set(HeaderVersion, c.Version)
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", c.URL, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		var e apiError
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("%s %s: %s", method, path, resp.Status)
		}
		return nil, &APIError{Status: resp.StatusCode, Code: e.Code, Msg: fmt.Sprintf("server %s: %s", c.URL, e.Error)}
	}
	return resp, nil
}

// Whoami is the identity the client's token names.
func (c *Client) Whoami(ctx context.Context) (Identity, error) {
	var id Identity
	return id, c.getJSON(ctx, "/v1/whoami", &id)
}

// Jobs are the server's jobs.
func (c *Client) Jobs(ctx context.Context) ([]JobRow, error) {
	var rows []JobRow
	return rows, c.getJSON(ctx, "/v1/jobs", &rows)
}

// Audit is the server's audit log.
func (c *Client) Audit(ctx context.Context) ([]AuditEntry, error) {
	var rows []AuditEntry
	return rows, c.getJSON(ctx, "/v1/audit", &rows)
}

func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	resp, err := c.do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// Run has the server run a command (args, the command first) and writes
// its output as it comes; the command's exit code is returned.
func (c *Client) Run(ctx context.Context, args []string, out, errOut io.Writer) (int, error) {
	body, _ := json.Marshal(runRequest{Args: args})
	resp, err := c.do(ctx, http.MethodPost, "/v1/run", bytes.NewReader(body), "application/json")
	if err != nil {
		return 1, err
	}
	defer resp.Body.Close()
	code, _, err := copyFrames(resp.Body, out, errOut)
	if err == nil && code == nil {
		err = errors.New("the server's answer ended before the command did")
	}
	if err != nil {
		return 1, err
	}
	return *code, nil
}

// Submit sends a job bundle; the server queues the job and names it.
func (c *Client) Submit(ctx context.Context, name string, bundle io.Reader, asJSON bool) (string, error) {
	q := url.Values{"name": {name}}
	if asJSON {
		q.Set("json", "1")
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/jobs?"+q.Encode(), bundle, "application/gzip")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var r struct {
		Job string `json:"job"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return "", err
	}
	return r.Job, nil
}

// Follow writes a job's output until its up (or down) ends, and returns
// its exit code. A connection the server drops (it restarted) is picked
// up again from where it was, for as long as Reconnect.
func (c *Client) Follow(ctx context.Context, id string, out, errOut io.Writer, note func(string)) (int, error) {
	clk := c.Clock
	if clk == nil {
		clk = clock.Wall{}
	}
	patience := c.Reconnect
	if patience <= 0 {
		patience = 2 * time.Minute
	}
	var offset int64
	var lost time.Time
	for {
		resp, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/follow?offset="+strconv.FormatInt(offset, 10), nil, "")
		if err == nil {
			lost = time.Time{}
			code, n, cerr := copyFrames(resp.Body, out, errOut)
			resp.Body.Close()
			offset += n
			if code != nil {
				return *code, nil
			}
			err = cerr
			if err == nil {
				err = errors.New("the server closed the stream")
			}
		}
		var api *APIError
		if errors.As(err, &api) || ctx.Err() != nil {
			return 1, err
		}
		if lost.IsZero() {
			lost = clk.Now()
			if note != nil {
				note(fmt.Sprintf("lost the server (%v); following again when it is back", err))
			}
		} else if clk.Now().Sub(lost) > patience {
			return 1, fmt.Errorf("server %s gone for more than %s: %w (`vastfleet status %s` once it is back)", c.URL, patience, err, id)
		}
		if err := clk.Sleep(ctx, 500*time.Millisecond); err != nil {
			return 1, err
		}
	}
}

// copyFrames writes frames' text to out and errOut, and returns the exit
// code (nil if none came) and the bytes of whole frames read.
func copyFrames(r io.Reader, out, errOut io.Writer) (*int, int64, error) {
	br := bufio.NewReader(r)
	var n int64
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
				if len(line) > 0 {
					err = io.ErrUnexpectedEOF
				}
			}
			return nil, n, err
		}
		n += int64(len(line))
		var f frame
		if err := json.Unmarshal(line, &f); err != nil {
			return nil, n, fmt.Errorf("a bad frame from the server: %w", err)
		}
		if f.Out != "" {
			io.WriteString(out, f.Out)
		}
		if f.Err != "" {
			io.WriteString(errOut, f.Err)
		}
		if f.Exit != nil {
			return f.Exit, n, nil
		}
	}
}
