package httpserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/httpserver/httpservertest"
)

// Thirty slow clients against a server with short timeouts are all cut by
// the server, none left for the guard (ten times the timeouts) to end;
// meanwhile an event stream outlives Read.
func TestSlowClientsAreCut(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("POST /body", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 1<<20))
	})
	tick := make(chan struct{})
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for i := 0; ; i++ {
			fmt.Fprintf(w, "data: %d\n\n", i)
			if rc.Flush() != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-tick:
			}
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(mux, Timeouts{ReadHeader: timeout, Read: timeout, Idle: timeout})
	go srv.Serve(ln)
	defer srv.Close()

	resp, err := http.Get("http://" + ln.Addr().String() + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewReader(resp.Body)
	readEvent := func() (string, error) {
		line, err := events.ReadString('\n')
		events.ReadString('\n')
		return strings.TrimSpace(line), err
	}
	if e, err := readEvent(); e != "data: 0" {
		t.Fatalf("first event %q, %v", e, err)
	}

	for i, err := range httpservertest.SlowClients(ln.Addr().String(), 30, 10*timeout) {
		if err != nil {
			t.Errorf("slow client %d: %v", i, err)
		}
	}
	// The slow clients took at least the Read bound: the stream is past it.
	tick <- struct{}{}
	if e, err := readEvent(); e != "data: 1" {
		t.Errorf("the event stream after the read timeout: %q, %v", e, err)
	}
}

// The defaults bound every read phase.
func TestNewBoundsEveryReadPhase(t *testing.T) {
	s := New(http.NotFoundHandler(), Timeouts{})
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.IdleTimeout <= 0 {
		t.Errorf("server %+v leaves a read phase unbounded", s)
	}
}
