package launch

// The decisions of each tick, made from the policies (policy.go) over the
// nodes' counts: surplus, release, termination; and the actions they take.

import (
	"context"
	"fmt"
	"time"
)

// counts by phase, not counting doomed nodes.
type counts struct{ booting, parking, parked, releasing, ready, doomed int }

func (r *runner) counts() counts {
	var c counts
	for _, n := range r.nodes {
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
func (r *runner) spares() int {
	// Only parked instances are lost at the release: the share expected
	// to come back counts those kept running as sure.
	parked := observedShare(1, r.parkedOK, r.parkedOK+r.keptRunning)
	back := 1 - parked*(1-releaseShare(takenPerMinute(r.releaseLost, r.parkedMinutes), r.parkMinutesAhead()))
	return spareCount(r.spec.Park, r.spec.Backfill, r.released, r.spec.Spare, back, r.spec.Count)
}

// parkPays decides for a node that just booted whether parking it until
// the release is worth its risk: it saves its $/hr until the release
// lead before the deadline, and risks, at the loss rate seen so far, what
// a booted instance costs on this market (its own pull and boot, over the
// share of boots that succeed). Without backfill (the manual recipe), or
// asked to park all, every one is parked.
func (r *runner) parkPays(n *node, now time.Time) bool {
	if !r.spec.Backfill || r.spec.ParkAll {
		return true
	}
	minutes := 5.0 // the published launch's, without a deadline
	if !r.deadline.IsZero() {
		minutes = r.deadline.Add(-r.releaseLead()).Sub(now).Minutes()
	}
	value := (n.offer.PullCost(r.spec.ImageGB) + n.offer.DPHTotal*n.load.Hours()) / r.bootShare(now, r.nextLoad(), r.rentLead())
	return parkPays(n.offer.DPHTotal, takenPerMinute(r.releaseLost, r.parkedMinutes), minutes, value)
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
func (r *runner) parkMinutesAhead() float64 {
	if r.deadline.IsZero() {
		return 5
	}
	load := r.nextLoad()
	window := r.deadline.Add(-r.releaseLead()).Sub(r.start.Add(load))
	return max(min(window.Minutes()*2/3, r.lateAfter(load).Minutes()), 0.5)
}

// target is how many live slots the launch keeps.
func (r *runner) target() int { return r.spec.Count + r.spares() }

// bootShare is the share of loading instances expected to boot in time:
// the published prior moved by this launch's boots and boot failures. A
// launch with time to see a rental late and boot its replacement, twice
// over (a replacement fails too), before the deadline, or without one,
// rents no margin for failures: it replaces them as they show.
// load and lead are the next rental's, as nextLoad and rentLead give them.
func (r *runner) bootShare(now time.Time, load, lead time.Duration) float64 {
	if bootsInTime(now.Add(2*lateAfter(load, 1, r.spec.HedgeAfter, r.spec.PollEvery)), r.deadline, load, lead) {
		return 1
	}
	return observedShare(priorBootShare, r.bootOK, r.bootOK+r.bootFailed)
}

func (r *runner) rankOf(offerID int64) int {
	if i, ok := r.rank[offerID]; ok {
		return i
	}
	return len(r.rank)
}

// decide runs the release wave, trims surplus and reports whether the
// launch is over. It adds nodes to destroy.
func (r *runner) decide(ctx context.Context, now time.Time, toDestroy *[]int64) bool {
	c := r.counts()
	booted := c.parking + c.parked + c.releasing + c.ready
	pastDeadline := !r.deadline.IsZero() && !now.Before(r.deadline)
	if r.spec.Budget > 0 && !r.finishing {
		if total, bw := r.projected(now); total >= r.spec.Budget {
			r.capStop(now, fmt.Sprintf("budget cap $%.2f reached ($%.2f projected once what runs is stopped, $%.2f of it bandwidth)", r.spec.Budget, total, bw))
			r.finishing = true
		}
	}
	if pastDeadline && !r.finishing {
		r.finishing = true
		r.emit(Event{Event: EvDeadline, At: now, Msg: fmt.Sprintf("deadline: %d of %d booted", booted, r.spec.Count)})
	}
	drop := func(n *node, why string) {
		if n.dropping {
			return
		}
		n.dropping = true
		*toDestroy = append(*toDestroy, n.id)
		r.emit(Event{Event: EvDestroyed, At: now, InstanceID: n.id, OfferID: n.offerID, State: n.state, Msg: why})
	}
	// Complete (Count run, none parked), or, with backfill, enough booted
	// before the release: what is beyond goes.
	complete := (r.released || !r.spec.Park) && c.ready >= r.spec.Count
	var live []trimNode
	for _, n := range r.sorted() {
		if !n.dropping {
			ph := n.phase
			if n.outbid {
				ph = phBooting // stopped by a rival: not serving, as counts has it
			}
			live = append(live, trimNode{id: n.id, phase: ph, rank: r.rankOf(n.offerID), failed: n.doomed})
		}
	}
	for _, x := range surplus(live, complete, r.spec.Backfill && !r.released, r.spec.Count, r.target()) {
		drop(r.nodes[x.id], x.why)
	}
	if complete {
		return true
	}
	c = r.counts()
	canRent := !r.finishing && r.capHit == "" && r.moreCandidates() && r.budgetFits(now)
	if r.spec.Park && !r.released {
		back, backSD := r.expectedBack(now)
		load := r.nextLoad()
		due, why := releaseDue(releaseView{
			park: r.spec.Park, released: r.released, finishing: r.finishing, backfill: r.spec.Backfill,
			now: now, deadline: r.deadline, lead: r.releaseLead(),
			booting: c.booting, onTime: r.onTime(now), booted: booted, up: c.parking + c.parked + c.ready,
			back: back, backSD: backSD,
			replaceable: replaceableAfter(now, r.deadline, load, r.lateAfter(load), r.releaseLead()),
			quorum:      min(r.spec.Count, r.spec.MinReady) + r.spares(),
			canRent:     canRent, rentsOK: r.rentsOK, count: r.spec.Count,
		})
		if due {
			r.releaseWave(ctx, now, c, why)
			c = r.counts()
		}
	} else if r.released {
		// Parked nodes left behind by a crash during the wave.
		var late []*node
		for _, n := range r.sorted() {
			if n.phase == phParked && !n.doomed {
				late = append(late, n)
			}
		}
		r.start1(ctx, late, now)
		c = r.counts()
	}
	if r.finishing {
		// Unready instances are destroyed; released ones get their
		// release timeout.
		for _, n := range r.sorted() {
			if n.phase == phBooting || n.doomed {
				drop(n, "not running at the end of the launch")
			}
		}
	}
	switch ending(endView{
		finishing: r.finishing,
		booting:   c.booting, parking: c.parking, parked: c.parked, releasing: c.releasing, doomed: c.doomed,
		canRent: canRent, backfill: r.spec.Backfill, rentsOK: r.rentsOK, count: r.spec.Count,
		noDeadline: r.deadline.IsZero(),
	}) {
	case launchDone:
		return true
	case startEnd:
		r.finishing = true
	}
	return false
}

// expectedBack is how many of the nodes up are expected to run after a
// release now (see expectedBack); a node still parking counts as parked
// from now.
func (r *runner) expectedBack(now time.Time) (mean, sd float64) {
	running := 0
	var parked []float64
	for _, n := range r.nodes {
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
	return expectedBack(running, parked, takenPerMinute(r.releaseLost, r.parkedMinutes))
}

// lateAfter is how long a rental expected to load in load may take before
// it is late, with this launch's boot ratio and hedge setting.
func (r *runner) lateAfter(load time.Duration) time.Duration {
	return lateAfter(load, r.ratio, r.spec.HedgeAfter, r.spec.PollEvery)
}

// onTime counts the loading nodes not yet late.
func (r *runner) onTime(now time.Time) int {
	k := 0
	for _, n := range r.nodes {
		if n.phase == phBooting && !n.doomed && !n.dropping && (n.gated() || now.Sub(n.rentedAt) <= r.lateAfter(n.load)) {
			k++
		}
	}
	return k
}

// releaseLead is how long before the deadline this launch releases.
func (r *runner) releaseLead() time.Duration {
	return releaseLead(r.releaseDur, r.spec.Deadline, r.spec.ReleaseTimeout, r.spec.PollEvery)
}

func (r *runner) releaseWave(ctx context.Context, now time.Time, c counts, why string) {
	r.released = true
	if err := r.f.SetMeta(ctx, releasedKey(r.spec.Fleet), now.UTC().Format(time.RFC3339Nano)); err != nil {
		r.emit(Event{Event: EvWarn, At: now, Msg: err.Error()})
	}
	var ns []*node
	for _, n := range r.sorted() {
		if (n.phase == phParked || n.phase == phParking) && !n.doomed {
			ns = append(ns, n)
		}
	}
	up := c.parking + c.parked + c.ready
	msg := fmt.Sprintf("releasing %d parked instances (%d booted of %d asked; %s)", len(ns), up, r.spec.Count, why)
	if len(ns) == 0 {
		// Every booted one was kept running: parking did not pay.
		msg = fmt.Sprintf("nothing parked to release: %d booted of %d asked run already (%s)", up, r.spec.Count, why)
	}
	r.emit(Event{Event: EvRelease, At: now, Msg: msg})
	r.start1(ctx, ns, now)
}

// start1 starts parked nodes and marks them releasing.
func (r *runner) start1(ctx context.Context, ns []*node, now time.Time) {
	for _, n := range ns {
		n.phase, n.releasedAt = phReleasing, now
	}
	r.sendStart(ctx, ns, now)
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

func (r *runner) capStop(now time.Time, msg string) {
	if r.capHit == "" {
		r.capHit = msg
		r.emit(Event{Event: EvCap, At: now, Msg: "stopped at " + msg})
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
