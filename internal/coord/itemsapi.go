package coord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// Limits on an item result.
const (
	maxOutputs    = 64
	maxOutputPath = 1024
	maxLeaseLen   = 64
)

// lastSeen is a node's latest heartbeat on the coordinator's clock.
func (s *Server) lastSeen(fleet, node string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.fleets[fleet]; f != nil {
		if n := f.nodes[node]; n != nil {
			return n.lastSeen, true
		}
	}
	return time.Time{}, false
}

// expire puts back in the queue the leases (of one fleet, or all when
// fleet is "") whose node has been quiet for longer than ItemLease.
func (s *Server) expire(ctx context.Context, fleet string) error {
	n, err := s.db.expireLeases(ctx, fleet, s.now(), s.cfg.ItemLease, s.lastSeen)
	if n > 0 {
		s.log.Info("item leases expired: their nodes went quiet; the items are queued again", "items", n, "fleet", fleet)
	}
	return err
}

// sweepItems expires leases and refreshes the live item counts, which
// also pick up items another process (launch) added to the database.
func (s *Server) sweepItems() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.expire(ctx, ""); err != nil {
		s.log.Warn("expiring item leases failed", "err", err)
	}
	counts, err := s.db.allItemCounts(ctx)
	if err != nil {
		s.log.Warn("counting items failed", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, c := range counts {
		s.fleet(name).items = c
	}
}

func (s *Server) handleItemLease(w http.ResponseWriter, r *http.Request, c caller) {
	var req wire.ItemLeaseRequest
	valid := func() error {
		if err := validName("node", req.Node); err != nil {
			return err
		}
		return validName("session", req.Session)
	}
	if !s.admitNode(w, r, c, &req, &req.Fleet, &req.Node, "lease request", valid) {
		return
	}
	// Leases of quiet nodes first, so that their items can go out now.
	if err := s.expire(r.Context(), c.fleet); err != nil {
		s.log.Error("expiring item leases failed", "fleet", c.fleet, "err", err)
		writeError(w, http.StatusServiceUnavailable, "items unavailable, ask again")
		return
	}
	now := s.now()
	h := holder{node: c.node, session: req.Session, machineID: c.machineID, image: c.image}
	it, lease, left, err := s.db.leaseItem(r.Context(), c.fleet, h, now.Add(s.cfg.ItemLease), s.cfg.Rand)
	if errors.Is(err, errCaught) {
		s.forbid(w, c, err.Error())
		return
	}
	if err != nil {
		s.log.Error("leasing an item failed", "fleet", c.fleet, "err", err)
		writeError(w, http.StatusServiceUnavailable, "items unavailable, ask again")
		return
	}
	switch {
	case it != nil:
		writeJSON(w, wire.ItemLease{Item: it, Lease: lease, LeaseS: s.cfg.ItemLease.Seconds(), Left: left})
	case left > 0:
		// Every remaining item is out with another node; one may yet come
		// back to the queue if that node goes quiet.
		writeJSON(w, wire.ItemLease{RetryS: s.cfg.HeartbeatInterval.Seconds(), Left: left})
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) handleItemResult(w http.ResponseWriter, r *http.Request, c caller) {
	var res wire.ItemResult
	if !s.admitNode(w, r, c, &res, &res.Fleet, &res.Node, "item result", func() error { return validateItemResult(&res) }) {
		return
	}
	v, err := s.db.FleetValidation(r.Context(), c.fleet)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "result not stored, send it again")
		return
	}
	verdict := ""
	if v.Verify != "" && s.db.holds(r.Context(), c.fleet, c.node, res.ID, res.Lease) {
		verdict = s.verifyResult(r.Context(), c.fleet, v, c, &res)
	}
	h := holder{node: c.node, session: res.Session, machineID: c.machineID, image: c.image}
	stored, caught, err := s.db.recordResult(r.Context(), c.fleet, h, &res, verdict, s.now(), s.cfg.Rand)
	if errors.Is(err, ErrNoSuchItem) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("item %d: %v", res.ID, err))
		return
	}
	if errors.Is(err, errNotHolder) {
		s.forbid(w, c, fmt.Sprintf("item %d lease %q: %v", res.ID, res.Lease, err))
		return
	}
	s.reportCaught(r.Context(), caught)
	if err != nil {
		s.log.Error("storing an item result failed", "fleet", c.fleet, "item", res.ID, "err", err)
		writeError(w, http.StatusServiceUnavailable, "result not stored, send it again")
		return
	}
	if !stored {
		s.countBad(c, badReplay)
	}
	if s.cfg.Durable != nil {
		if err := s.cfg.Durable(r.Context()); err != nil {
			s.log.Error("item result committed but not replicated: not acknowledged", "fleet", c.fleet, "item", res.ID, "err", err)
			writeError(w, http.StatusServiceUnavailable, "result not replicated, send it again")
			return
		}
	}
	writeJSON(w, wire.ItemResultAck{ID: res.ID, Stored: stored})
}

func validateItemResult(r *wire.ItemResult) error {
	if err := validName("node", r.Node); err != nil {
		return err
	}
	if r.Session != "" {
		if err := validName("session", r.Session); err != nil {
			return err
		}
	}
	if r.ID <= 0 {
		return fmt.Errorf("id = %d: want a positive item id", r.ID)
	}
	if len(r.Lease) > maxLeaseLen {
		return fmt.Errorf("lease is longer than %d bytes", maxLeaseLen)
	}
	if len(r.StdoutTail) > wire.MaxStdoutTail {
		return fmt.Errorf("stdout_tail is longer than %d bytes", wire.MaxStdoutTail)
	}
	if len(r.Outputs) > maxOutputs {
		return fmt.Errorf("%d outputs is more than %d", len(r.Outputs), maxOutputs)
	}
	for i, o := range r.Outputs {
		if err := validText(fmt.Sprintf("outputs[%d].path", i), o.Path, maxOutputPath); err != nil {
			return err
		}
		if o.Bytes < 0 {
			return fmt.Errorf("outputs[%d].bytes is negative", i)
		}
		if o.SHA256 != "" && !isHex64(o.SHA256) {
			return fmt.Errorf("outputs[%d].sha256: want 64 hex digits", i)
		}
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// holds says whether node holds the item's lease now (so that verify runs
// only for results that will be taken).
func (d *DB) holds(ctx context.Context, fleet, node string, item int64, lease string) bool {
	var n int
	err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE fleet = ? AND item = ? AND lease = ? AND node = ? AND state = 'leased'`,
		fleet, item, lease, node).Scan(&n)
	return err == nil && n > 0
}
