package launch

// The fleet's decisions of each tick, planned from the policies
// (policy.go) over the nodes' counts: surplus, release, termination; and
// the runner's starts and destroys that carry them out.

import (
	"context"
	"fmt"
	"time"
)

// counts by phase, not counting doomed nodes.
type counts struct{ booting, parking, parked, releasing, ready, doomed int }

func (m *model) counts() counts {
	var c counts
	for _, n := range m.nodes {
		if n.dropping {
			continue
		}
		if n.doomed {
			c.doomed++
			continue
		}
		if n.outbid && n.phase != phBooting {
			c.booting++ // stopped by a rival: not serving until it runs again
			continue
		}
		switch n.phase {
		case phBooting:
			c.booting++
		case phParking:
			c.parking++
		case phParked:
			c.parked++
		case phReleasing:
			c.releasing++
		case phReady:
			c.ready++
		}
	}
	return c
}

// spares is how many spares the launch rents while parking.
func (m *model) spares() int {
	// Only parked instances are lost at the release: the share expected
	// to come back counts those kept running as sure.
	parked := observedShare(1, m.parkedOK, m.parkedOK+m.keptRunning)
	back := 1 - parked*(1-releaseShare(takenPerMinute(m.releaseLost, m.parkedMinutes), m.parkMinutesAhead()))
	return spareCount(m.spec.Park, m.spec.Backfill, m.released, m.spec.Spare, back, m.spec.Count)
}

// parkPays decides for a node that just booted whether parking it until
// the release is worth its risk: it saves its $/hr until the release
// lead before the deadline, and risks, at the loss rate seen so far, what
// a booted instance costs on this market (its own pull and boot, over the
// share of boots that succeed). Without backfill (the manual recipe), or
// asked to park all, every one is parked.
func (m *model) parkPays(n *node, now time.Time) bool {
	if !m.spec.Backfill || m.spec.ParkAll {
		return true
	}
	minutes := 5.0 // the published launch's, without a deadline
	if !m.deadline.IsZero() {
		minutes = m.deadline.Add(-m.releaseLead()).Sub(now).Minutes()
	}
	value := (n.offer.PullCost(m.spec.ImageGB) + n.offer.DPHTotal*n.load.Hours()) / m.bootShare(now, m.nextLoad(), m.rentLead())
	return parkPays(n.offer.DPHTotal, takenPerMinute(m.releaseLost, m.parkedMinutes), minutes, value)
}

// parkMinutesAhead is how long the launch's instances are expected to stay
// parked: two thirds of the time between the first expected boots and the
// release lead before the deadline (boots spread over it, and the
// release may come only at the deadline), counted from the launch's start
// so that the spares do not shrink as the parked ones wait; five minutes,
// the published launch's, without a deadline. Never longer than a boot
// takes to be late: with a distant deadline the fleet is released about
// when the count is up (releaseDue), so the first to boot wait about that
// long, not until the deadline.
func (m *model) parkMinutesAhead() float64 {
	if m.deadline.IsZero() {
		return 5
	}
	load := m.nextLoad()
	window := m.deadline.Add(-m.releaseLead()).Sub(m.start.Add(load))
	return max(min(window.Minutes()*2/3, m.lateAfter(load).Minutes()), 0.5)
}

// target is how many live slots the launch keeps.
func (m *model) target() int { return m.spec.Count + m.spares() }

// bootShare is the share of loading instances expected to boot in time:
// the published prior moved by this launch's boots and boot failures. A
// launch with time to see a rental late and boot its replacement, twice
// over (a replacement fails too), before the deadline, or without one,
// rents no margin for failures: it replaces them as they show.
// load and lead are the next rental's, as nextLoad and rentLead give them.
func (m *model) bootShare(now time.Time, load, lead time.Duration) float64 {
	if bootsInTime(now.Add(2*lateAfter(load, 1, m.spec.HedgeAfter, m.spec.PollEvery)), m.deadline, load, lead) {
		return 1
	}
	return observedShare(priorBootShare, m.bootOK, m.bootOK+m.bootFailed)
}

func (m *model) rankOf(offerID int64) int {
	if i, ok := m.rank[offerID]; ok {
		return i
	}
	return len(m.rank)
}

// expectedBack is how many of the nodes up are expected to run after a
// release now (see expectedBack); a node still parking counts as parked
// from now.
func (m *model) expectedBack(now time.Time) (mean, sd float64) {
	running := 0
	var parked []float64
	for _, n := range m.nodes {
		if n.doomed || n.dropping {
			continue
		}
		switch n.phase {
		case phReady:
			running++
		case phParking, phParked:
			m := 0.0
			if !n.stopSentAt.IsZero() {
				m = now.Sub(n.stopSentAt).Minutes()
			}
			parked = append(parked, m)
		}
	}
	return expectedBack(running, parked, takenPerMinute(m.releaseLost, m.parkedMinutes))
}

// lateAfter is how long a rental expected to load in load may take before
// it is late, with this launch's boot ratio and hedge setting.
func (m *model) lateAfter(load time.Duration) time.Duration {
	return lateAfter(load, m.ratio, m.spec.HedgeAfter, m.spec.PollEvery)
}

// onTime counts the loading nodes not yet late.
func (m *model) onTime(now time.Time) int {
	k := 0
	for _, n := range m.nodes {
		if n.phase == phBooting && !n.doomed && !n.dropping && (n.gated() || now.Sub(n.rentedAt) <= m.lateAfter(n.load)) {
			k++
		}
	}
	return k
}

// releaseLead is how long before the deadline this launch releases.
func (m *model) releaseLead() time.Duration {
	return releaseLead(m.releaseDur, m.spec.Deadline, m.spec.ReleaseTimeout, m.spec.PollEvery)
}

// sendStart sends a start to each node; a node whose start fails is sent
// another at the next listing (transitions), until its release timeout.
func (r *runner) sendStart(ctx context.Context, ns []*node, now time.Time) {
	if len(ns) > 1 {
		ids := make([]int64, len(ns))
		for i, n := range ns {
			ids[i] = n.id
		}
		if errs, ok := r.f.ReleaseAll(ctx, ids); ok {
			for _, n := range ns {
				n.startSentAt = now
				n.startOK = errs[n.id] == nil
				if err := errs[n.id]; err != nil {
					r.emit(Event{Event: EvWarn, At: now, InstanceID: n.id, Msg: err.Error()})
				}
			}
			return
		}
	}
	r.parallel(ctx, ns, func(ctx context.Context, n *node) error {
		n.startSentAt, n.startOK = now, false
		err := r.f.Release(ctx, n.id)
		n.startOK = err == nil // a start re-sent after a failed record is harmless
		return err
	})
}

func (m *model) capStop(now time.Time, msg string) {
	if m.capHit == "" {
		m.capHit = msg
		m.say(Event{Event: EvCap, At: now, Msg: "stopped at " + msg})
	}
}

// destroy destroys nodes through the manager (confirmed by listing); a
// destroy not yet confirmed is retried at the next tick.
func (r *runner) destroy(ctx context.Context, ids []int64) {
	if len(ids) == 0 {
		return
	}
	seen := map[int64]bool{}
	var uniq []int64
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	now := r.now()
	for _, id := range uniq {
		if p := r.pulls[id]; p != nil && p.DestroyRequestedAt.IsZero() {
			p.DestroyRequestedAt = now
		}
		if n, ok := r.nodes[id]; ok {
			r.forget(n)
			r.destroyed++
			r.goingDPH[id] = n.offer.DPHTotal
		}
		r.destroying[id] = now
	}
	// In the background, so that the loop keeps ticking while listings
	// confirm; bounded: an unconfirmed destroy stays "destroy requested"
	// and later listings confirm it (observe marks it gone).
	r.wg.Add(1)
	r.busy(1)
	go func() {
		defer r.wg.Done()
		defer r.busy(-1)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*r.spec.PollEvery+30*time.Second)
		defer cancel()
		if err := r.f.Destroy(dctx, uniq); err != nil {
			r.emit(Event{Event: EvWarn, At: now, Msg: "destroy: " + err.Error()})
		}
	}()
}

// decide plans the release wave, trims surplus and says whether the
// launch is over; the destroys, starts and events it decides are in the
// plan (take).
func (m *model) decide(now time.Time) bool {
	c := m.counts()
	booted := c.parking + c.parked + c.releasing + c.ready
	m.checkBudget(now)
	m.checkDeadline(now, booted)
	// Complete (Count run, none parked), or, with backfill, enough booted
	// before the release: what is beyond goes.
	complete := (m.released || !m.spec.Park) && c.ready >= m.spec.Count
	m.trim(now, complete)
	if complete {
		return true
	}
	canRent := !m.finishing && m.capHit == "" && m.moreCandidates() && m.budgetFits(now)
	c = m.releaseStep(now, m.counts(), booted, canRent)
	if m.finishing {
		// Unready instances are destroyed; released ones get their
		// release timeout.
		for _, n := range m.sorted() {
			if n.phase == phBooting || n.doomed {
				m.drop(n, "not running at the end of the launch", now)
			}
		}
	}
	switch ending(endView{
		finishing: m.finishing,
		booting:   c.booting, parking: c.parking, parked: c.parked, releasing: c.releasing, doomed: c.doomed,
		canRent: canRent, backfill: m.spec.Backfill, rentsOK: m.rentsOK, count: m.spec.Count,
		noDeadline: m.deadline.IsZero(),
	}) {
	case launchDone:
		return true
	case startEnd:
		m.finishing = true
	}
	return false
}

// checkBudget starts the end once what the launch will have spent, with
// what runs now stopped, reaches the budget.
func (m *model) checkBudget(now time.Time) {
	if m.spec.Budget <= 0 || m.finishing {
		return
	}
	if total, bw := m.projected(now); total >= m.spec.Budget {
		m.capStop(now, fmt.Sprintf("budget cap $%.2f reached ($%.2f projected once what runs is stopped, $%.2f of it bandwidth)", m.spec.Budget, total, bw))
		m.finishing = true
	}
}

// checkDeadline starts the end at the deadline.
func (m *model) checkDeadline(now time.Time, booted int) {
	if !m.deadline.IsZero() && !now.Before(m.deadline) && !m.finishing {
		m.finishing = true
		m.say(Event{Event: EvDeadline, At: now, Msg: fmt.Sprintf("deadline: %d of %d booted", booted, m.spec.Count)})
	}
}

// drop plans a node's destruction, once, and says why.
func (m *model) drop(n *node, why string, now time.Time) {
	if n.dropping {
		return
	}
	n.dropping = true
	m.act(Action{Kind: ActDestroy, Instance: n.id, Offer: n.offerID, Reason: why})
	m.say(Event{Event: EvDestroyed, At: now, InstanceID: n.id, OfferID: n.offerID, State: n.state, Msg: why})
}

// trim drops the surplus (see surplus).
func (m *model) trim(now time.Time, complete bool) {
	var live []trimNode
	for _, n := range m.sorted() {
		if !n.dropping {
			ph := n.phase
			if n.outbid {
				ph = phBooting // stopped by a rival: not serving, as counts has it
			}
			live = append(live, trimNode{id: n.id, phase: ph, rank: m.rankOf(n.offerID), failed: n.doomed})
		}
	}
	for _, x := range surplus(live, complete, m.spec.Backfill && !m.released, m.spec.Count, m.target()) {
		m.drop(m.nodes[x.id], x.why, now)
	}
}

// releaseStep starts the release wave when it is due (releaseDue), or,
// released already, starts what a crash during the wave left parked. It
// returns the counts after.
func (m *model) releaseStep(now time.Time, c counts, booted int, canRent bool) counts {
	switch {
	case m.spec.Park && !m.released:
		due, why := releaseDue(m.releaseView(now, c, booted, canRent))
		if !due {
			return c
		}
		m.releaseWave(now, c, why)
	case m.released:
		var late []*node
		for _, n := range m.sorted() {
			if n.phase == phParked && !n.doomed {
				late = append(late, n)
			}
		}
		m.start1(late, now, "parked when the release wave was cut off")
	default:
		return c
	}
	return m.counts()
}

// releaseView is what releaseDue looks at now.
func (m *model) releaseView(now time.Time, c counts, booted int, canRent bool) releaseView {
	back, backSD := m.expectedBack(now)
	load := m.nextLoad()
	return releaseView{
		park: m.spec.Park, released: m.released, finishing: m.finishing, backfill: m.spec.Backfill,
		now: now, deadline: m.deadline, lead: m.releaseLead(),
		booting: c.booting, onTime: m.onTime(now), booted: booted, up: c.parking + c.parked + c.ready,
		back: back, backSD: backSD,
		replaceable: replaceableAfter(now, m.deadline, load, m.lateAfter(load), m.releaseLead()),
		quorum:      min(m.spec.Count, m.spec.MinReady) + m.spares(),
		canRent:     canRent, rentsOK: m.rentsOK, count: m.spec.Count,
	}
}

// releaseWave starts every parked node, recorded first so that a resume
// after a crash finishes the wave.
func (m *model) releaseWave(now time.Time, c counts, why string) {
	m.released = true
	m.act(Action{Kind: ActRecordRelease, Reason: why})
	var ns []*node
	for _, n := range m.sorted() {
		if (n.phase == phParked || n.phase == phParking) && !n.doomed {
			ns = append(ns, n)
		}
	}
	up := c.parking + c.parked + c.ready
	msg := fmt.Sprintf("releasing %d parked instances (%d booted of %d asked; %s)", len(ns), up, m.spec.Count, why)
	if len(ns) == 0 {
		// Every booted one was kept running: parking did not pay.
		msg = fmt.Sprintf("nothing parked to release: %d booted of %d asked run already (%s)", up, m.spec.Count, why)
	}
	m.say(Event{Event: EvRelease, At: now, Msg: msg})
	m.start1(ns, now, "release wave: "+why)
}

// start1 marks parked nodes releasing and plans their starts.
func (m *model) start1(ns []*node, now time.Time, why string) {
	for _, n := range ns {
		n.phase, n.releasedAt = phReleasing, now
		m.act(Action{Kind: ActRelease, Instance: n.id, Offer: n.offerID, Reason: why})
	}
}
