package coord

import (
	"net"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/httpserver"
	"github.com/vastfleet/vastfleet/internal/httpserver/httpservertest"
)

// The coordinator's server, with short timeouts, cuts 30 unauthenticated
// slow clients (headers a byte short, a body never sent, a connection
// left idle) well before the guard; before, a slow body was kept open
// for as long as the client liked.
func TestCoordinatorCutsSlowClients(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	const timeout = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := r.srv.HTTPServer(httpserver.Timeouts{ReadHeader: timeout, Read: timeout, Idle: timeout})
	go hs.Serve(ln)
	defer hs.Close()
	for i, err := range httpservertest.SlowClients(ln.Addr().String(), 30, 10*timeout) {
		if err != nil {
			t.Errorf("slow client %d: %v", i, err)
		}
	}
}
