package coord

import (
	"context"
	"errors"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// errClosing answers requests that arrive while the server shuts down.
var errClosing = errors.New("coordinator is shutting down")

// findingsReq is one POSTed batch on its way to SQLite.
type findingsReq struct {
	fleet, node string
	items       []wire.Finding
	receivedAt  time.Time
	// Filled by the writer.
	stored int
	new    []int // indexes into items of the keys stored for the first time
	done   chan error
}

// maxGroup is how many batches share one transaction (one fsync).
const maxGroup = 256

// writer is the one goroutine that writes SQLite: findings in group
// commits (every batch waiting while the previous commit synced goes into
// the next one), and node heartbeats written behind, once per flush tick,
// as the newest per node is all a restart needs.
func (s *Server) writer() {
	defer s.wg.Done()
	flush := time.NewTicker(s.flushEvery)
	defer flush.Stop()
	for {
		select {
		case r := <-s.findingsQ:
			s.commitFindings(r)
		case <-flush.C:
			s.flushNodes()
			s.sweepItems()
		case <-s.stop:
			// Handlers still holding a request are answered by the
			// closing check; what is queued is committed.
			for {
				select {
				case r := <-s.findingsQ:
					s.commitFindings(r)
				default:
					s.flushNodes()
					return
				}
			}
		}
	}
}

func (s *Server) commitFindings(first *findingsReq) {
	group := []*findingsReq{first}
drain:
	for len(group) < maxGroup {
		select {
		case r := <-s.findingsQ:
			group = append(group, r)
		default:
			break drain
		}
	}
	// Not the request's context: a client that hangs up must not abort a
	// commit other batches share.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := s.db.insertFindings(ctx, group)
	if err == nil && s.cfg.Durable != nil {
		// One wait for the whole group, as one commit.
		if err = s.cfg.Durable(ctx); err != nil {
			s.log.Error("findings committed but not replicated: not acknowledged", "batches", len(group), "err", err)
		}
	}
	cancel()
	if err == nil {
		s.recordFindings(group)
	} else {
		s.log.Error("storing findings failed", "batches", len(group), "err", err)
	}
	for _, r := range group {
		r.done <- err
	}
}

func (s *Server) flushNodes() {
	s.mu.Lock()
	if len(s.dirty) == 0 {
		s.mu.Unlock()
		return
	}
	nodes := make([]savedNode, 0, len(s.dirty))
	for k := range s.dirty {
		if n := s.fleets[k.fleet].nodes[k.node]; n != nil {
			nodes = append(nodes, savedNode{fleet: k.fleet, lastSeen: n.lastSeen, hb: n.hb})
		}
	}
	clear(s.dirty)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.db.saveNodes(ctx, nodes); err != nil {
		// Only the last-known view after a restart suffers; the live
		// state is intact and the next heartbeat marks the node again.
		s.log.Warn("saving node heartbeats failed", "nodes", len(nodes), "err", err)
	}
}
