package coord

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// replyCache holds each fleet's heartbeat reply for a heartbeat interval,
// so that hundreds of agents do not each cost a SQLite read, while a
// launch beside the running coordinator (which records its fleet's
// dead-man switch in the DB) reaches its agents within an interval.
type replyCache struct {
	mu sync.Mutex
	m  map[string]cachedReply
}

type cachedReply struct {
	body []byte
	at   time.Time
}

// heartbeatReply is what the agents of fleet are told: the heartbeat
// interval and the dead-man switch the fleet was launched with
// (launch --orphan-after/--orphan-policy, recorded by SetFleetPolicy).
// Only a fleet with no recorded switch gets the coordinator's own. If
// the record cannot be read the switch is left out, and the agents keep
// the one their launch gave them rather than being told another.
func (s *Server) heartbeatReply(ctx context.Context, fleet string) []byte {
	now := s.now()
	s.replies.mu.Lock()
	c, ok := s.replies.m[fleet]
	s.replies.mu.Unlock()
	if ok && now.Sub(c.at) < s.cfg.HeartbeatInterval && !now.Before(c.at) {
		return c.body
	}
	reply := wire.HeartbeatReply{IntervalS: s.cfg.HeartbeatInterval.Seconds()}
	after, policy, recorded, err := s.db.FleetPolicy(ctx, fleet)
	switch {
	case err != nil:
		s.log.Warn("reading the fleet's dead-man switch; agents keep theirs", "fleet", fleet, "err", err)
		if ok {
			return c.body
		}
	case recorded && after > 0 && (policy == wire.PolicyStop || policy == wire.PolicyDestroy):
		reply.OrphanAfterS, reply.OrphanPolicy = after.Seconds(), policy
	default:
		reply.OrphanAfterS, reply.OrphanPolicy = s.cfg.OrphanAfter.Seconds(), s.cfg.OrphanPolicy
	}
	body, _ := json.Marshal(reply)
	if err == nil {
		s.replies.mu.Lock()
		s.replies.m[fleet] = cachedReply{body: body, at: now}
		s.replies.mu.Unlock()
	}
	return body
}
