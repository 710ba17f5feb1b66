package sim

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/vastfleet/vastfleet/internal/httpserver"
)

// Serve serves the market on addr until ctx ends, then shuts the server
// down (giving in-flight requests a few seconds).
func (m *Market) Serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return m.ServeListener(ctx, ln)
}

// ServeListener is Serve on an existing listener (e.g. 127.0.0.1:0).
func (m *Market) ServeListener(ctx context.Context, ln net.Listener) error {
	m.mu.Lock()
	m.apiURL = "http://" + ln.Addr().String()
	m.mu.Unlock()
	srv := m.server()
	hctx, stopHosts := context.WithCancel(ctx)
	defer stopHosts()
	go m.runHostSync(hctx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// server bounds every phase of a connection, so slow or idle clients (or
// many) cannot hold sockets and goroutines open for long. No call takes
// near a minute: handlers answer from memory.
func (m *Market) server() *http.Server {
	return httpserver.New(m.Handler(), httpserver.Timeouts{
		ReadHeader: 10 * time.Second,
		Read:       60 * time.Second,
		Write:      60 * time.Second,
		Idle:       60 * time.Second,
	})
}
