package launch

// The end of a launch: its summary, and what an interrupted one leaves.

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/provider"
)

func (r *runner) progress() *Progress {
	c := r.counts()
	bw, _ := r.bandwidth(r.now())
	p := &Progress{Asked: r.spec.Count, Booting: c.booting, Parked: c.parking + c.parked, Releasing: c.releasing,
		Ready: c.ready, Failed: r.failed, Rented: r.rentsOK, Spent: r.spent + bw}
	for _, n := range r.nodes {
		p.DPH += n.rate()
		if n.phase == phBooting && !n.doomed && !n.dropping && n.seen {
			if p.Stages == nil {
				p.Stages = map[string]int{}
			}
			p.Stages[r.stage(n)]++
		}
	}
	if !r.deadline.IsZero() {
		p.TimeLeft = max(0, r.deadline.Sub(r.now()))
	}
	return p
}

// finish ends a launch and reports it. The summary is taken when the
// fleet is complete; then rents still in flight (one settling a lost
// response can take minutes) are waited for, and a last few listings make
// the store agree with the marketplace for this fleet: rentals whose
// outcome was unknown are adopted by label, and everything not ready is
// destroyed as surplus, confirmed by listing.
func (r *runner) finish(ctx context.Context) (Summary, error) {
	s := r.summary(ctx)
	before := r.destroyed
	r.waitAll()
	r.land(ctx)
	for try := 0; try < 10 && ctx.Err() == nil; try++ {
		ready := map[int64]bool{}
		for _, n := range r.readyNodes() {
			ready[n.id] = true
		}
		var extra []int64
		for _, n := range r.sorted() {
			if !ready[n.id] {
				extra = append(extra, n.id)
				r.emit(Event{Event: EvDestroyed, At: r.now(), InstanceID: n.id, OfferID: n.offerID, Msg: "surplus: rented after the launch completed"})
			}
		}
		r.destroy(ctx, extra)
		r.waitAll()
		if try > 0 && len(extra) == 0 && len(r.destroying) == 0 {
			break
		}
		l, err := r.f.ListInstances(ctx)
		if err != nil {
			if errors.Is(err, provider.ErrAuth) || r.sleep(ctx, listRetry) != nil {
				break
			}
			continue
		}
		r.destroy(ctx, r.observe(ctx, l, r.now()))
		r.waitAll()
	}
	s.Destroyed += r.destroyed - before
	r.emit(Event{Event: EvSummary, At: r.now(), Summary: &s})
	return s, nil
}

func (r *runner) summary(ctx context.Context) Summary {
	s := Summary{Clock: clock.Kind(r.f.Clock()), Fleet: r.spec.Fleet, Asked: r.spec.Count, MinReady: r.spec.MinReady, Rented: r.rentsOK, Failed: r.failed, Destroyed: r.destroyed,
		StoppedAtCap: r.capHit, Elapsed: r.now().Sub(r.start), EndedAt: r.now(), ReadyIDs: []int64{}}
	s.Replaced = max(0, r.rentsOK-r.spec.Count)
	s.Outbid, s.Rebids, s.ShortHardware = r.outbids, r.rebids, r.shortHW
	if !r.deadline.IsZero() {
		past := math.Round(s.EndedAt.Sub(r.deadline).Seconds()*10) / 10
		s.PastDeadlineS = &past
	}
	if s.StoppedAtCap == "" && len(r.readyNodes()) < r.spec.Count {
		switch {
		case r.budgetHeld != "" && !r.budgetFits(r.now()):
			s.StoppedAtCap = r.budgetHeld
		case r.dphCapped != "":
			s.StoppedAtCap = r.dphCapped
		}
	}
	for _, n := range r.readyNodes() {
		s.Ready++
		s.ReadyIDs = append(s.ReadyIDs, n.id)
		s.DPHTotal += n.offer.DPHTotal
		s.VCPU += n.offer.CPUCoresEffective
		s.RAMGB += n.offer.CPURAM / 1000
		s.GPUs += n.offer.NumGPUs
	}
	bw, _ := r.bandwidth(r.now())
	s.BootSpend = r.spent + bw
	if c, err := r.f.Cost(context.WithoutCancel(ctx), r.spec.Fleet); err == nil && len(c.Fleets) == 1 {
		s.BootSpend = c.Fleets[0].Total
	}
	return s
}

func (m *model) readyNodes() []*node {
	var out []*node
	for _, n := range m.sorted() {
		if n.phase == phReady && !n.doomed && !n.dropping && n.state == provider.StateRunning {
			out = append(out, n)
		}
	}
	return out
}

// interrupted applies Spec.OnInterrupt after a cancellation; the work
// outlives the cancelled context, bounded by cleanupTimeout.
func (r *runner) interrupted(ctx context.Context) (Summary, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	r.settle(ctx)
	now := r.now()
	var ids []int64
	for _, n := range r.sorted() {
		switch r.spec.OnInterrupt {
		case InterruptDestroyAll:
			ids = append(ids, n.id)
		case InterruptDestroyUnready:
			if !n.booted() || n.doomed {
				ids = append(ids, n.id)
			}
		}
	}
	r.emit(Event{Event: EvInterrupted, At: now, Msg: fmt.Sprintf("interrupted (%s): %d instances to destroy; `launch --resume %s` continues", r.spec.OnInterrupt, len(ids), r.spec.Fleet)})
	r.destroy(cctx, ids)
	r.waitAll()
	s := r.summary(cctx)
	s.Interrupted = true
	r.emit(Event{Event: EvSummary, At: r.now(), Summary: &s})
	return s, ErrInterrupted
}

// settle waits for the rents in flight and takes them in.
func (r *runner) settle(ctx context.Context) {
	r.waitAll()
	r.land(ctx)
}

// waitAll waits for the background goroutines; the loop does not count as
// busy meanwhile (a virtual clock must move for them to finish).
func (r *runner) waitAll() {
	r.busy(-1)
	r.wg.Wait()
	r.busy(1)
}
