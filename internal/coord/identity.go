package coord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// Instance is what the caller's membership check knows of one instance
// of a fleet: the machine it runs on (replicas go to distinct machines,
// trust and the bad-host list are per machine) and its image.
type Instance struct {
	MachineID int64
	Image     string
	// Advertised is what the marketplace lists for the instance's machine
	// (effective cores, RAM, GPUs): the enrolling agent's boot probe tests
	// the machine for it. It comes from the account's listing, never from
	// the host.
	Advertised wire.Capacity
}

// Membership says which instances belong to a fleet now: the caller
// answers from its store and the marketplace's listing, so that this
// package needs neither. An instance missing from the answer cannot
// enroll, and a credential whose instance has gone missing is revoked.
type Membership interface {
	Instances(ctx context.Context, fleet string) (map[int64]Instance, error)
}

// MembershipFunc adapts a function to Membership.
type MembershipFunc func(ctx context.Context, fleet string) (map[int64]Instance, error)

// Instances calls f.
func (f MembershipFunc) Instances(ctx context.Context, fleet string) (map[int64]Instance, error) {
	return f(ctx, fleet)
}

// ErrEnrolled is a second enrollment of an instance whose credential
// stands: only the first caller with a given CONTAINER_ID gets one.
var ErrEnrolled = errors.New("this instance has already enrolled")

// errNodeTaken is an enrollment under a node name another instance holds.
var errNodeTaken = errors.New("another instance of this fleet reports under this node name")

// credential is one instance's token, as the auth table holds it.
type credential struct {
	fleet      string
	node       string
	instanceID int64
	machineID  int64
	image      string
}

// enroll stores a new credential's hash for the instance; the plain token
// is given back once and kept nowhere here.
func (d *DB) enroll(ctx context.Context, c credential, tokenHash []byte, now time.Time) error {
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM credentials WHERE fleet = ? AND instance_id = ? AND revoked_at = 0`,
		c.fleet, c.instanceID).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return ErrEnrolled
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM credentials WHERE fleet = ? AND node = ? AND revoked_at = 0`,
		c.fleet, c.node).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return errNodeTaken
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO credentials (token_hash, fleet, instance_id, node, machine_id, image, issued_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, tokenHash, c.fleet, c.instanceID, c.node, c.machineID, c.image, now.UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

// RevokeInstance revokes the instance's credential (when it is destroyed
// or replaced): its agent is refused from then on, and the instance id
// may enroll again. It reports whether there was one to revoke.
func (d *DB) RevokeInstance(ctx context.Context, fleet string, instanceID int64, reason string) (bool, error) {
	res, err := d.w.ExecContext(ctx, `UPDATE credentials SET revoked_at = ?, reason = ?
		WHERE fleet = ? AND instance_id = ? AND revoked_at = 0`, time.Now().UnixNano(), reason, fleet, instanceID)
	if err != nil {
		return false, fmt.Errorf("coord: revoking instance %d: %w", instanceID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// liveCredentials lists every credential not revoked, by token hash.
func (d *DB) liveCredentials(ctx context.Context) (map[string]credential, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT token_hash, fleet, node, instance_id, machine_id, image
		FROM credentials WHERE revoked_at = 0`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]credential{}
	for rows.Next() {
		var h []byte
		var c credential
		if err := rows.Scan(&h, &c.fleet, &c.node, &c.instanceID, &c.machineID, &c.image); err != nil {
			return nil, err
		}
		out[string(h)] = c
	}
	return out, rows.Err()
}

// InstanceChecker is a Membership that can also answer for one instance
// (the marketplace's show-instance): an enrolling instance missing from
// the fleet's cached answer is checked alone, rather than by listing the
// whole account again, which at 1,000 instances is 40 pages while the
// launch keeps adding more.
type InstanceChecker interface {
	Instance(ctx context.Context, fleet string, id int64) (Instance, bool, error)
}

// members caches each fleet's membership answer briefly, so that a fleet
// booting together costs one marketplace listing now and then, not one
// per instance. The answer is fetched by one caller at a time per fleet,
// without the lock: the others wait for it (or for their own context).
type members struct {
	src      Membership
	mu       sync.Mutex
	at       map[string]time.Time
	set      map[string]map[int64]Instance
	inflight map[string]chan struct{}
}

// membersFresh is how old a cached answer may be for an instance found in
// it (a destroyed instance that enrolls from a stale answer loses its
// credential at the next revocation sweep); a miss asks again, at most
// once per membersRetry (an instance that enrolls too early is refused
// and its agent retries).
const (
	membersFresh = 5 * time.Second
	membersRetry = 250 * time.Millisecond
)

func (m *members) lookup(ctx context.Context, fleet string, id int64) (Instance, bool, error) {
	m.mu.Lock()
	if in, ok := m.set[fleet][id]; ok && time.Since(m.at[fleet]) < membersFresh {
		m.mu.Unlock()
		return in, true, nil
	}
	m.mu.Unlock()
	if c, ok := m.src.(InstanceChecker); ok {
		return c.Instance(ctx, fleet, id)
	}
	if err := m.refresh(ctx, fleet); err != nil {
		return Instance{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	in, ok := m.set[fleet][id]
	return in, ok, nil
}

// refresh reads the fleet's membership again unless it was read within
// membersRetry; while one read is in flight, callers wait for it.
func (m *members) refresh(ctx context.Context, fleet string) error {
	m.mu.Lock()
	if ch := m.inflight[fleet]; ch != nil {
		m.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if time.Since(m.at[fleet]) < membersRetry {
		m.mu.Unlock()
		return nil
	}
	if m.inflight == nil {
		m.at, m.set, m.inflight = map[string]time.Time{}, map[string]map[int64]Instance{}, map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	m.inflight[fleet] = ch
	m.mu.Unlock()
	// Not the caller's context alone: the answer serves every waiter.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	set, err := m.src.Instances(rctx, fleet)
	cancel()
	m.mu.Lock()
	if err == nil {
		m.at[fleet], m.set[fleet] = time.Now(), set
	}
	delete(m.inflight, fleet)
	close(ch)
	m.mu.Unlock()
	return err
}

// maxEnrolling is how many enrollments are checked and stored at once.
// Each may read the store and ask the marketplace, and the credentials
// are written one at a time anyway: a fleet of 1,000 booting together
// otherwise opened a store connection per agent, and every agent that
// gave up and retried left a handler (and its socket) waiting, until the
// coordinator held 20,000 files, its limit. Waiting for a turn ends when
// the agent hangs up.
const maxEnrolling = 32

func (s *Server) handleEnroll(w http.ResponseWriter, r *http.Request, c caller) {
	var req wire.EnrollRequest
	valid := func() error {
		if req.InstanceID <= 0 {
			return fmt.Errorf("instance_id = %d: want this instance's CONTAINER_ID", req.InstanceID)
		}
		if req.Node == "" {
			req.Node = "C." + strconv.FormatInt(req.InstanceID, 10)
		}
		return validName("node", req.Node)
	}
	if !s.admit(w, r, c, &req, &req.Fleet, "enrollment", valid) {
		return
	}
	if s.members.src == nil {
		writeError(w, http.StatusServiceUnavailable, "this coordinator cannot check which instances belong to a fleet, so it enrolls none")
		return
	}
	select {
	case s.enrolling <- struct{}{}:
		defer func() { <-s.enrolling }()
	case <-r.Context().Done():
		return // the agent gave up; it enrolls again
	}
	in, ok, err := s.members.lookup(r.Context(), c.fleet, req.InstanceID)
	if err != nil {
		s.log.Warn("checking an enrolling instance failed", "fleet", c.fleet, "instance", req.InstanceID, "err", err)
		writeError(w, http.StatusServiceUnavailable, "cannot check this instance's fleet now, enroll again")
		return
	}
	if !ok {
		s.refuse(c.fleet, "instance "+strconv.FormatInt(req.InstanceID, 10))
		writeError(w, http.StatusForbidden, fmt.Sprintf("instance %d is not one of fleet %q's instances", req.InstanceID, c.fleet))
		return
	}
	tok, err := newToken()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cannot make a credential")
		return
	}
	cred := credential{fleet: c.fleet, node: req.Node, instanceID: req.InstanceID, machineID: in.MachineID, image: in.Image}
	h := hashToken(tok)
	switch err := s.db.enroll(r.Context(), cred, h, s.now()); {
	case errors.Is(err, ErrEnrolled), errors.Is(err, errNodeTaken):
		s.refuse(c.fleet, "instance "+strconv.FormatInt(req.InstanceID, 10))
		writeError(w, http.StatusConflict, fmt.Sprintf("instance %d: %v", req.InstanceID, err))
		return
	case err != nil:
		s.log.Error("storing a credential failed", "fleet", c.fleet, "err", err)
		writeError(w, http.StatusServiceUnavailable, "credential not stored, enroll again")
		return
	}
	s.auth.addCredential(h, cred)
	s.log.Info("instance enrolled", "fleet", c.fleet, "instance", req.InstanceID, "node", req.Node, "machine", in.MachineID)
	rep := wire.EnrollReply{Token: tok, Node: req.Node}
	if in.Advertised != (wire.Capacity{}) {
		rep.Advertised = &in.Advertised
	}
	writeJSON(w, rep)
}

// revokeGone revokes the credentials of instances no longer in their
// fleet (destroyed or replaced). An answer that failed revokes nothing.
func (s *Server) revokeGone(ctx context.Context) {
	if s.members.src == nil {
		return
	}
	live, err := s.db.liveCredentials(ctx)
	if err != nil {
		s.log.Warn("reading credentials failed", "err", err)
		return
	}
	byFleet := map[string][]credential{}
	for _, c := range live {
		byFleet[c.fleet] = append(byFleet[c.fleet], c)
	}
	for fleet, cs := range byFleet {
		set, err := s.members.src.Instances(ctx, fleet)
		if err != nil {
			s.log.Warn("checking a fleet's instances failed; no credential revoked", "fleet", fleet, "err", err)
			continue
		}
		for _, c := range cs {
			if _, ok := set[c.instanceID]; ok {
				continue
			}
			if _, err := s.db.RevokeInstance(ctx, fleet, c.instanceID, "instance left the fleet"); err != nil {
				s.log.Warn("revoking a credential failed", "err", err)
				continue
			}
			s.log.Info("credential revoked: its instance left the fleet", "fleet", fleet, "instance", c.instanceID, "node", c.node)
		}
	}
	if err := s.auth.reload(ctx); err != nil {
		s.log.Warn("reloading tokens failed", "err", err)
	}
}

// revoker runs revokeGone every RevokeEvery until Close.
func (s *Server) revoker() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.RevokeEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			s.revokeGone(ctx)
			cancel()
		}
	}
}

// refuse counts a 403 against the node (or, before enrollment, the
// instance) that asked: the dashboard and /metrics show them.
func (s *Server) refuse(fleet, who string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fleet(fleet)
	if f.refused == nil {
		f.refused = map[string]int64{}
	}
	if _, ok := f.refused[who]; !ok && len(f.refused) >= maxNodesPerFleet {
		who = "other"
	}
	f.refused[who]++
}

// who names the caller in counts: its node, or the kind of token it holds
// before it has one.
func (c caller) who() string {
	if c.node == "" {
		return c.role + " token"
	}
	return c.node
}

// forbid answers 403 and counts it against the caller's node.
func (s *Server) forbid(w http.ResponseWriter, c caller, msg string) {
	s.refuse(c.fleet, c.who())
	writeError(w, http.StatusForbidden, msg)
}

// badKey is one count of bad input: who sent it and what was wrong.
type badKey struct{ who, reason string }

// countBad counts a malformed, oversized or invalid request against the
// node that sent it.
func (s *Server) countBad(c caller, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fleet(c.fleet)
	if f.bad == nil {
		f.bad = map[badKey]int64{}
	}
	k := badKey{c.who(), reason}
	if _, ok := f.bad[k]; !ok && len(f.bad) >= maxNodesPerFleet {
		k.who = "other"
	}
	f.bad[k]++
}

// sameNode checks the node a body names against the credential's: empty
// takes the credential's, anything else must be it.
func (s *Server) sameNode(w http.ResponseWriter, c caller, body *string) bool {
	if *body == "" {
		*body = c.node
	}
	if *body != c.node {
		s.forbid(w, c, fmt.Sprintf("this credential is node %q's, not %q's", c.node, *body))
		return false
	}
	return true
}
