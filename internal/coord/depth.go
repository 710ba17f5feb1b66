package coord

import (
	"net/http"
	"sync"
	"time"
)

// PathDepth answers GET (viewer) with the market's depth curve as SVG:
// what the top N offers would give together, the view users check before
// growing a fleet.
const PathDepth = "/api/v1/depth.svg"

// depthCache keeps the last drawing: a sweep of the market is far too
// slow and costly to run per page view.
type depthCache struct {
	mu  sync.Mutex
	svg []byte
	at  time.Time
}

func (s *Server) handleDepth(w http.ResponseWriter, r *http.Request, _ caller) {
	if s.cfg.MarketDepth == nil {
		writeError(w, http.StatusNotFound, "this coordinator does not draw the market depth")
		return
	}
	every := s.cfg.DepthEvery
	if every <= 0 {
		every = 10 * time.Minute
	}
	s.depth.mu.Lock()
	defer s.depth.mu.Unlock()
	if s.depth.svg == nil || time.Since(s.depth.at) > every {
		svg, err := s.cfg.MarketDepth(r.Context())
		if err != nil {
			s.log.Warn("market depth", "err", err)
			if s.depth.svg == nil {
				writeError(w, http.StatusServiceUnavailable, "the market depth could not be read; try again later")
				return
			}
		} else {
			s.depth.svg, s.depth.at = svg, time.Now()
		}
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "private, max-age=60")
	w.Write(s.depth.svg)
}
