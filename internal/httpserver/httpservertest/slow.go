// Package httpservertest holds the slow-client attack every vastfleet
// HTTP server is tested against.
package httpservertest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// SlowClients opens n connections to addr, each a slow client of one
// kind in turn: headers never finished (slowloris), a body promised and
// never sent, a connection kept alive after one request and left idle. It
// returns, per connection, what ended it: nil when the server closed it
// before guard, else the error.
func SlowClients(addr string, n int, guard time.Duration) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = slowClient(addr, i%3, guard)
		}()
	}
	wg.Wait()
	return errs
}

func slowClient(addr string, kind int, guard time.Duration) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	switch kind {
	case 0: // slowloris: headers begun, never ended
		_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n")
	case 1: // slow body: 1000 bytes promised, 10 sent
		_, err = io.WriteString(c, "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789")
	case 2: // idle: one request, then nothing
		_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	if err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(guard))
	br := bufio.NewReader(c)
	if kind == 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return fmt.Errorf("idle client's request: %w", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	_, err = io.Copy(io.Discard, br)
	if err == nil || errors.Is(err, net.ErrClosed) || isReset(err) {
		return nil // EOF or reset: the server closed it
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("kind %d: still open after %s", kind, guard)
	}
	return err
}

func isReset(err error) bool { return strings.Contains(err.Error(), "connection reset") }
