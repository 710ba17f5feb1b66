package coord

import (
	"net/http"

	"github.com/vastfleet/vastfleet/internal/httpserver"
)

// HTTPServer serves the coordinator and its dashboard with every read
// phase bounded (httpserver.Timeouts; zero values take its defaults):
// an unauthenticated client sending a byte at a time is cut, not kept.
// No write bound by default: the event stream and the agent download may
// rightly take long, and the stream bounds its own writes.
func (s *Server) HTTPServer(t httpserver.Timeouts) *http.Server {
	return httpserver.New(s.Handler(), t)
}
