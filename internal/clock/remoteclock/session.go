package remoteclock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
)

// Session is a command's hold on the local market's shared clock: while
// it is open the market moves only when the command (and every other
// holder) waits. Its Clock is the command's: a virtual clock whose every
// move is the market's (clock.Virtual.SetJump).
type Session struct {
	base   string
	id     string
	client *http.Client
	v      *clock.Virtual
	cancel context.CancelFunc
	ended  chan struct{}
}

// sessionReply is the first line of GET /sim/session and a sleep's answer.
type sessionReply struct {
	ID  string    `json:"id"`
	Now time.Time `json:"now"`
}

// OpenSession opens a session on the market served at baseURL. It lasts
// until Close, or until this process ends (the market then lets go).
func OpenSession(ctx context.Context, baseURL string) (*Session, error) {
	base := strings.TrimSuffix(baseURL, "/")
	sctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, base+"/sim/session", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	// No client timeout: the answer lasts the session. The first line is
	// bounded by ctx instead.
	client := &http.Client{}
	type opened struct {
		resp *http.Response
		r    sessionReply
		err  error
	}
	got := make(chan opened, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			got <- opened{err: err}
			return
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			got <- opened{err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))}
			return
		}
		line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
		var r sessionReply
		if err == nil {
			err = json.Unmarshal(line, &r)
		}
		if err == nil && r.ID == "" {
			err = errors.New("no session id in the answer")
		}
		got <- opened{resp: resp, r: r, err: err}
	}()
	var o opened
	select {
	case o = <-got:
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
	if o.err != nil {
		cancel()
		if o.resp != nil {
			o.resp.Body.Close()
		}
		return nil, fmt.Errorf("opening a session on the local market: %w", o.err)
	}
	s := &Session{base: base, id: o.r.ID, client: &http.Client{}, cancel: cancel, ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		io.Copy(io.Discard, o.resp.Body) // until Close or the market's end
		o.resp.Body.Close()
	}()
	s.v = clock.NewVirtual(o.r.Now)
	s.v.SetJump(s.sleep)
	return s, nil
}

// Clock is the command's clock, moved with the market.
func (s *Session) Clock() *clock.Virtual { return s.v }

// sleep asks the market to move to until, and returns the time it reached.
func (s *Session) sleep(ctx context.Context, until time.Time) (time.Time, error) {
	select {
	case <-s.ended:
		return time.Time{}, errors.New("the local market ended the session")
	default:
	}
	b, _ := until.MarshalText()
	u := s.base + "/sim/session/" + s.id + "/sleep?until=" + url.QueryEscape(string(b))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return time.Time{}, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return time.Time{}, fmt.Errorf("the local market's clock: HTTP %d", resp.StatusCode)
	}
	var r sessionReply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return time.Time{}, err
	}
	return r.Now, nil
}

// Close ends the session and stops its clock.
func (s *Session) Close() {
	s.cancel()
	<-s.ended
	s.v.Close()
}
