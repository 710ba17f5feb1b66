package sim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
)

// Sessions let the commands that use a local market in turn share its
// clock (clock.Shared): a command holds GET /sim/session open while it
// runs, and asks POST /sim/session/{id}/sleep?until=T when every one of
// its goroutines waits. The market then moves only when every open
// session waits, and at its pace between sessions. A session ends when
// its request does, so a command killed with -9 lets go of the market.
type sessions struct {
	mu   sync.Mutex
	open map[string]bool
}

// SessionReply is the first line of GET /sim/session and the answer to a
// sleep: the session and the market's time.
type SessionReply struct {
	ID  string    `json:"id,omitempty"`
	Now time.Time `json:"now"`
}

func (m *Market) sessionRoutes(mux *http.ServeMux, sc *clock.Shared) {
	ss := &sessions{open: map[string]bool{}}
	mux.HandleFunc("GET /sim/session", func(w http.ResponseWriter, r *http.Request) {
		if !loopback(r.RemoteAddr) {
			http.Error(w, "sim admin is loopback-only", http.StatusForbidden)
			return
		}
		rc := http.NewResponseController(w)
		// The session lasts as long as the command: no deadline ends it.
		rc.SetReadDeadline(time.Time{})
		rc.SetWriteDeadline(time.Time{})
		end := sc.Open()
		defer func() {
			end()
			m.lastRequest.Store(time.Now().UnixNano()) // quiet from here
		}()
		var b [12]byte
		rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		ss.mu.Lock()
		ss.open[id] = true
		ss.mu.Unlock()
		defer func() {
			ss.mu.Lock()
			delete(ss.open, id)
			ss.mu.Unlock()
		}()
		w.Header().Set("Content-Type", "application/x-ndjson")
		if err := json.NewEncoder(w).Encode(SessionReply{ID: id, Now: sc.Now()}); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		<-r.Context().Done()
	})
	mux.HandleFunc("POST /sim/session/{id}/sleep", func(w http.ResponseWriter, r *http.Request) {
		if !loopback(r.RemoteAddr) {
			http.Error(w, "sim admin is loopback-only", http.StatusForbidden)
			return
		}
		ss.mu.Lock()
		ok := ss.open[r.PathValue("id")]
		ss.mu.Unlock()
		if !ok {
			http.Error(w, "no such session: open one with GET /sim/session", http.StatusNotFound)
			return
		}
		var until time.Time
		if err := until.UnmarshalText([]byte(r.URL.Query().Get("until"))); err != nil {
			http.Error(w, "until must be an RFC 3339 time", http.StatusBadRequest)
			return
		}
		rc := http.NewResponseController(w)
		rc.SetWriteDeadline(time.Time{}) // other sessions' work may hold the clock a while
		if d := until.Sub(sc.Now()); d > 0 {
			if err := sc.Sleep(r.Context(), d); err != nil {
				return
			}
		}
		m.mu.Lock()
		now := sc.Now()
		m.advance(now)
		m.syncHosts(now)
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(SessionReply{Now: now})
	})
}
