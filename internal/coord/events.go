package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// subscriber is one event stream. The pusher never waits for it: a
// snapshot that does not fit in ch drops the subscriber, so one stalled
// browser tab cannot slow ingest or the other tabs.
type subscriber struct {
	ch chan []byte // encoded events; closed when dropped
}

// subscriberBuffer is how many snapshots a subscriber may fall behind.
const subscriberBuffer = 4

// sseWriteTimeout ends a stream whose client stopped reading, so its
// goroutine does not linger on a full TCP window.
const sseWriteTimeout = 10 * time.Second

func (s *Server) subscribe(fleet string) *subscriber {
	sub := &subscriber{ch: make(chan []byte, subscriberBuffer)}
	s.mu.Lock()
	s.fleet(fleet).subs[sub] = struct{}{}
	s.mu.Unlock()
	return sub
}

func (s *Server) unsubscribe(fleet string, sub *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.fleets[fleet]; f != nil {
		if _, ok := f.subs[sub]; ok {
			delete(f.subs, sub)
			close(sub.ch)
		}
	}
}

// Subscribers is how many event streams the fleet has open.
func (s *Server) Subscribers(fleet string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.fleets[fleet]; f != nil {
		return len(f.subs)
	}
	return 0
}

// pusher sends each watched fleet's snapshot to its subscribers once per
// PushEvery. It also ages nodes from alive to stale to dead on screen when
// no heartbeat arrives at all.
func (s *Server) pusher() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.PushEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.dropAll()
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			s.sampleHistory(ctx)
			cancel()
			s.pushAll()
		}
	}
}

func (s *Server) pushAll() {
	s.mu.Lock()
	var watched []string
	for name, f := range s.fleets {
		if len(f.subs) > 0 {
			watched = append(watched, name)
		}
	}
	s.mu.Unlock()
	for _, name := range watched {
		s.push(name)
	}
}

// fullEvery is how many pushes apart a fleet's subscribers get the whole
// snapshot again rather than a delta, so a tab that lost one heals.
const fullEvery = 30

// push sends one moment of a fleet to all its subscribers: the rows of the
// nodes that changed since the last push (a delta), or the whole snapshot
// every fullEvery pushes. A fleet of 1,000 nodes whose agents report every
// 10 s changes about 100 rows a second, and the whole snapshot is 400 KiB.
func (s *Server) push(fleet string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	snap := s.Snapshot(ctx, fleet)
	cancel()
	rows := make(map[string][]byte, len(snap.Nodes))
	for _, n := range snap.Nodes {
		b, err := json.Marshal(n)
		if err != nil {
			s.log.Error("encoding a node", "err", err)
			return
		}
		rows[n.Node] = b
	}
	s.mu.Lock()
	f := s.fleets[fleet]
	if f == nil {
		s.mu.Unlock()
		return
	}
	prev, full := f.pushed, f.pushes%fullEvery == 0
	f.pushed = rows
	f.pushes++
	s.mu.Unlock()
	var msg []byte
	var err error
	if full || prev == nil {
		msg, err = encodeEvent("snapshot", snap)
	} else {
		d := wire.SnapshotDelta{At: snap.At, Clock: snap.Clock, Totals: snap.Totals, Findings: snap.Findings, Nodes: []json.RawMessage{}, Removed: []string{}}
		for _, n := range snap.Nodes {
			if !bytes.Equal(prev[n.Node], rows[n.Node]) {
				d.Nodes = append(d.Nodes, rows[n.Node])
			}
		}
		for name := range prev {
			if _, ok := rows[name]; !ok {
				d.Removed = append(d.Removed, name)
			}
		}
		msg, err = encodeEvent("delta", d)
	}
	if err != nil {
		s.log.Error("encoding snapshot", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f = s.fleets[fleet]; f == nil {
		return
	}
	for sub := range f.subs {
		select {
		case sub.ch <- msg:
		default:
			delete(f.subs, sub)
			close(sub.ch)
			s.log.Info("dropped a slow event subscriber", "fleet", fleet)
		}
	}
}

// encodeEvent is one server-sent event: its name and v as its data.
func encodeEvent(name string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b)+len(name)+16)
	out = append(out, "event: "...)
	out = append(out, name...)
	out = append(out, "\ndata: "...)
	out = append(out, b...)
	return append(out, "\n\n"...), nil
}

func (s *Server) dropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.fleets {
		for sub := range f.subs {
			delete(f.subs, sub)
			close(sub.ch)
		}
	}
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, c caller) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	sub := s.subscribe(c.fleet)
	defer s.unsubscribe(c.fleet, sub)

	send := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// The first snapshot at once, so a fresh tab is not blank for a tick.
	// Deltas from the next push on are against the push before it, and so
	// carry every row that changed since this snapshot too.
	first, err := encodeEvent("snapshot", s.Snapshot(r.Context(), c.fleet))
	if err != nil || !send(first) {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case b, ok := <-sub.ch:
			if !ok || !send(b) {
				return
			}
		}
	}
}
