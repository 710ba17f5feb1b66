package launch

// The planner's node transitions: each seen node moves on from what the
// listing showed and the gates found (gateChecks runs first), and what
// that takes is planned: parks of newly booted nodes, starts and stops
// sent again, change bids, failures (their machines marked bad, replaced
// with backfill).

import (
	"cmp"
	"fmt"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// transitions moves every seen node on and returns the plan: what
// happened, in node order, then the parks, the starts and the change bids
// (each kind one batch).
func (m *model) transitions(now time.Time) []Action {
	var parks, starts, rebids []Action
	for _, n := range m.sorted() {
		if n.doomed || n.dropping || !n.seen {
			continue
		}
		a := m.step(n, now)
		switch a.Kind {
		case ActPark:
			parks = append(parks, a)
		case ActRelease:
			starts = append(starts, a)
		case ActRebid:
			rebids = append(rebids, a)
		}
	}
	for _, batch := range [][]Action{parks, starts, rebids} {
		for _, a := range batch {
			m.act(a)
		}
	}
	return m.take()
}

// step moves one node on; it returns the park, start or change bid the
// node needs, if any.
func (m *model) step(n *node, now time.Time) Action {
	n.noteUnknown(now)
	if m.spec.Bid != nil {
		if a, outbid := m.outbid(n, now); outbid {
			return a
		}
	}
	if m.hostLost(n, now) {
		return Action{}
	}
	switch n.phase {
	case phBooting:
		return m.booting(n, now)
	case phParking:
		return m.parking(n, now)
	case phReleasing:
		return m.releasing(n, now)
	}
	return Action{}
}

// noteUnknown dates when the node's host stopped reporting.
func (n *node) noteUnknown(now time.Time) {
	switch {
	case n.state != provider.StateUnknown:
		n.unknownSince = time.Time{}
	case n.unknownSince.IsZero():
		n.unknownSince = now
	}
}

// outbid handles an interruptible node a rival outbid (outbidCheck):
// replaced, or re-bid; ok says it was outbid.
func (m *model) outbid(n *node, now time.Time) (Action, bool) {
	act, ok := m.outbidCheck(n, now)
	switch {
	case !ok:
		return Action{}, false
	case act.drop:
		// Its machine is skipped for this launch only: a rival holds it,
		// and the host is not at fault.
		m.giveUp(n, fmt.Sprintf("outbid at $%.4f/hr", n.bid), now)
	case act.price > 0:
		return Action{Kind: ActRebid, Instance: n.id, Offer: n.offerID, Price: act.price,
			Reason: fmt.Sprintf("outbid at $%.4f/hr", n.bid)}, true
	}
	return Action{}, true
}

// hostLost fails a node whose container exited, whose host went offline
// or stopped reporting for UnknownFor.
func (m *model) hostLost(n *node, now time.Time) bool {
	switch {
	case n.state == provider.StateExited:
		m.fail(n, "container exited", now)
	case n.state == provider.StateOffline:
		m.fail(n, "host went offline", now)
	case n.state == provider.StateUnknown && now.Sub(n.unknownSince) >= UnknownFor:
		m.fail(n, "no host heartbeat for "+UnknownFor.String(), now)
	default:
		return false
	}
	return true
}

// booting moves a loading node on: failed past the boot timeout, or,
// running and through the gates, ready: parked until the release where
// parking pays, else kept running.
func (m *model) booting(n *node, now time.Time) Action {
	if n.state != provider.StateRunning {
		if now.Sub(n.rentedAt) > m.spec.BootTimeout {
			m.fail(n, "still "+stateName(n.state)+" after the "+m.spec.BootTimeout.String()+" boot timeout", now)
		}
		return Action{}
	}
	if !m.gate(n, now) {
		return Action{}
	}
	m.bootOK++
	m.timeGates(n, now)
	m.say(Event{Event: EvReady, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, State: n.state,
		Msg: "booted in " + now.Sub(n.rentedAt).Round(time.Second).String()})
	// Past the deadline (a resume after it) the release is due: a stop
	// now would only risk the GPUs.
	switch {
	case !m.spec.Park || m.released || !m.deadline.IsZero() && !now.Before(m.deadline):
		n.phase = phReady
	case !m.parkPays(n, now):
		n.phase = phReady
		m.keptRunning++
		m.say(Event{Event: EvReady, At: now, InstanceID: n.id, State: n.state,
			Msg: fmt.Sprintf("kept running: at $%.3f/hr, parking risks more than it saves", n.offer.DPHTotal)})
	default:
		n.phase = phParking
		m.parkedOK++
		return Action{Kind: ActPark, Instance: n.id, Offer: n.offerID, Reason: "booted: parked until the release"}
	}
	return Action{}
}

// parking moves a node whose stop was sent on: parked once listed
// stopped; the stop is sent again when it did not take (or was never
// sent before a crash).
func (m *model) parking(n *node, now time.Time) Action {
	switch {
	case n.state == provider.StateStopped:
		n.phase = phParked
		m.say(Event{Event: EvParked, At: now, InstanceID: n.id, State: n.state})
	case now.Sub(n.stopSentAt) >= 2*m.spec.PollEvery:
		return Action{Kind: ActPark, Instance: n.id, Offer: n.offerID, Reason: "the stop did not take"}
	}
	return Action{}
}

// releasing moves a released node on: ready once it runs; failed when
// its GPUs were taken (Scheduling past SchedulingFor, or not running by
// the release timeout); the start is sent again when it failed or did
// not take.
func (m *model) releasing(n *node, now time.Time) Action {
	st := n.state
	switch {
	case st == provider.StateRunning:
		n.phase = phReady
		m.parkedMinutes += n.parkedFor()
		if !n.releasedAt.Before(m.since) {
			m.releaseDur = append(m.releaseDur, now.Sub(n.releasedAt))
		}
		m.say(Event{Event: EvRunning, At: now, InstanceID: n.id, State: st})
	case scheduling(n) && now.Sub(n.startSentAt) >= SchedulingFor:
		// Waiting for GPUs another renter holds: it may wait for ever,
		// so it is replaced now rather than at the timeout.
		m.fail(n, "scheduling "+now.Sub(n.startSentAt).Round(time.Second).String()+" after the release: its GPUs were taken", now)
	case now.Sub(n.releasedAt) > m.spec.ReleaseTimeout:
		m.fail(n, "not running "+m.spec.ReleaseTimeout.String()+" after the release (its GPUs were probably taken)", now)
	case st == provider.StateStopped && !scheduling(n) &&
		(!n.startOK || n.intended != provider.StateRunning && now.Sub(n.startSentAt) >= 2*m.spec.PollEvery):
		return Action{Kind: ActRelease, Instance: n.id, Offer: n.offerID, Reason: "the start failed or did not take"}
	}
	return Action{}
}

// fail handles an instance that will not serve: its machine goes on the
// bad-host list, and it is given up (giveUp).
func (m *model) fail(n *node, reason string, now time.Time) {
	if n.doomed {
		return
	}
	switch n.phase {
	case phBooting:
		m.bootFailed++
	case phReleasing:
		m.releaseLost++
		m.parkedMinutes += n.parkedFor()
	}
	m.markBad(n, reason)
	m.giveUp(n, reason, now)
}

// markBad plans the node's machine onto the bad-host list, with why.
func (m *model) markBad(n *node, reason string) {
	m.act(Action{Kind: ActMarkBad, Instance: n.id, Offer: n.offerID, Machine: n.machineID, Reason: reason})
}

// giveUp counts a node as failed and skips its machine for the rest of
// this launch; with backfill it is replaced now (destroyed, and fill
// rents another), without it is left until the end, as the manual recipe
// does.
func (m *model) giveUp(n *node, reason string, now time.Time) {
	if n.doomed {
		return
	}
	m.failed++
	m.bad[n.machineID] = true
	m.say(Event{Event: EvFailed, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, State: n.state, Msg: reason})
	if !m.spec.Backfill {
		n.doomed = true
		return
	}
	n.dropping = true
	m.act(Action{Kind: ActReplace, Instance: n.id, Offer: n.offerID, Reason: reason})
}

// gate decides whether a running node (first boot) is ready: usable (its
// SSH handshake completed) and, when hardware is judged, probed and not
// short. A node that stays unusable, or short under replace, fails like
// a failed boot (its machine on the bad-host list, replaced with
// backfill). false: the node waits, or failed.
func (m *model) gate(n *node, now time.Time) bool {
	if n.runningAt.IsZero() {
		n.runningAt = now
		m.timeBoot(n, now)
	}
	if !m.handshaken(n, now) {
		return false
	}
	if n.usableAt.IsZero() {
		n.usableAt = now
	}
	h := m.spec.Hardware
	if m.spec.Checks.Agents == nil || n.judged {
		return true // nothing to judge by
	}
	if h == nil {
		return m.agentHeard(n, now)
	}
	c, ok := m.probeVerdict(n, now, *h)
	if !ok {
		return false
	}
	n.judged = true
	if len(c.Short) == 0 {
		return true
	}
	return m.onShort(n, c, h.OnShort, now)
}

// handshaken says whether the node completed its SSH handshake (or none
// is asked); one that has not within UsableFor of running fails.
func (m *model) handshaken(n *node, now time.Time) bool {
	ck := m.spec.Checks
	if ck.Usable == nil || n.usable {
		return true
	}
	limit := ck.UsableFor
	if limit <= 0 {
		limit = DefaultUsableFor
	}
	if now.Sub(n.runningAt) >= limit {
		why := n.unusable
		if why == "" {
			why = "no handshake attempted"
		}
		m.fail(n, fmt.Sprintf("running for %s but its SSH handshake never completed (%s)", limit, why), now)
	}
	return false
}

// agentHeard says whether the coordinator has heard from the node's agent
// (hardware not judged): a node parked or counted ready before its agent
// reported may never report (an agent stopped between its enrollment and
// saving its credential is refused ever after, one whose onstart failed
// never runs), and its job would wait for it. One not heard within the
// probe wait fails like a failed boot.
func (m *model) agentHeard(n *node, now time.Time) bool {
	if n.agentSeen {
		n.judged = true
		return true
	}
	wait := cmp.Or(m.spec.Checks.ProbeWait, DefaultProbeWait)
	if now.Sub(n.usableAt) >= wait {
		m.fail(n, fmt.Sprintf("its agent never reported to the coordinator within %s of the node being usable", wait), now)
	}
	return false
}

// probeVerdict is the node's probe against its offer, or a failed check
// once the probe is ProbeWait late; ok is false while it may still come.
func (m *model) probeVerdict(n *node, now time.Time, h HardwarePolicy) (HardwareCheck, bool) {
	wait := h.ProbeWait
	if m.spec.Checks.ProbeWait > 0 {
		wait = m.spec.Checks.ProbeWait
	}
	switch {
	case n.probe != nil:
		return judge(*n.probe, n.offer, h.Below), true
	case now.Sub(n.usableAt) >= wait:
		return HardwareCheck{ProbeStatus: wire.ProbeFailed, Short: []string{"probe"},
			Advertised: wire.Capacity{Cores: n.offer.CPUCoresEffective, RAMMB: n.offer.CPURAM, GPUs: n.offer.NumGPUs},
			Error:      fmt.Sprintf("no boot probe reported within %s of the node being usable", wait)}, true
	}
	return HardwareCheck{}, false
}

// onShort reports a short or failed probe and acts as HardwarePolicy.OnShort
// says; it returns whether the node still counts as ready.
func (m *model) onShort(n *node, c HardwareCheck, onShort string, now time.Time) bool {
	c.Action = onShort
	ev := EvShortHardware
	if c.ProbeStatus != wire.ProbeOK {
		ev = EvProbeFailed
	}
	reason := c.figures()
	m.shortHW++
	m.say(Event{Event: ev, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, State: n.state,
		Msg: reason, Hardware: &c})
	switch onShort {
	case ShortReplace:
		m.fail(n, reason, now)
		return false
	case ShortWarn:
		m.markBad(n, reason)
	}
	return true
}
