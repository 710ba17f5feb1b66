package launch

import (
	"context"
	"fmt"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
)

// Interruptible launches (Spec.Bid): each create carries the bid, and an
// instance a rival outbids is replaced or re-bid (onOutbid decides; the
// runner acts here).

// atBid prices the candidates of a bid launch at its bid (bidAt); note says
// what was skipped. A bid below every offer's min_bid is refused before
// anything is rented or stored.
func atBid(spec Spec, cands []market.Ranked) (out []market.Ranked, note string, err error) {
	b := spec.Bid
	if b == nil {
		return cands, "", nil
	}
	out, skipped, lowest := bidAt(cands, *b, spec.Create.Disk)
	if len(out) == 0 {
		return nil, "", fmt.Errorf("%w: --bid $%.4f/hr per machine is below the min_bid of all %d offers (the lowest is $%.4f/hr); nothing was rented: bid at least that, or --bid min",
			ErrBidTooLow, b.Price, len(cands), lowest)
	}
	if skipped > 0 {
		note = fmt.Sprintf("%d offers skipped, their min_bid above the $%.4f/hr bid", skipped, b.Price)
	}
	return out, note, nil
}

// bidName says how a launch bids, for its start line.
func bidName(b Bid) string {
	how := fmt.Sprintf("interruptible, bidding each offer's min_bid + %.0f%%", MinBidMargin*100)
	if b.Price > 0 {
		how = fmt.Sprintf("interruptible, bidding $%.4f/hr per machine", b.Price)
	}
	if b.OnOutbid == OutbidRebid {
		return how + "; an outbid instance is re-bid (up to its on-demand price), then replaced"
	}
	return how + "; an outbid instance is replaced"
}

// createFor is the create body for offer o: with a bid, its price. A bid
// launch never sends a create without one: that would rent on demand.
func (r *runner) createFor(o market.Offer) provider.CreateRequest {
	// The boot probe learns what the offer advertises from the
	// coordinator at enrollment, not from the body: offers alike in all
	// but their hardware then share one bulk create.
	c := r.create
	if r.spec.Bid != nil {
		p, _ := r.spec.Bid.For(o)
		c.Price = &p
	}
	return c
}

// outbidDo is what transitions does with an outbid node.
type outbidDo struct {
	drop  bool
	price float64 // > 0: change the bid to this
}

// outbidCheck looks at an interruptible node's listing: ok says that the
// node is outbid and handled here (transitions skips its other checks).
func (m *model) outbidCheck(n *node, now time.Time) (outbidDo, bool) {
	if n.state == provider.StateRunning {
		n.outbid = false
	}
	eligible := n.phase == phBooting || n.phase == phReady ||
		n.phase == phReleasing && n.startOK && now.Sub(n.startSentAt) >= m.spec.PollEvery
	if !eligible || !outbidSeen(true, n.state, n.intended, n.statusMsg) {
		return outbidDo{}, false
	}
	canBid := m.canBid
	since := time.Duration(-1)
	if !n.rebidAt.IsZero() {
		since = now.Sub(n.rebidAt)
	}
	act, p := onOutbid(outbidView{mode: m.spec.Bid.OnOutbid, canBid: canBid, bid: n.bid, minBid: n.offer.MinBid,
		ceiling: n.offer.DPHBase, sinceRebid: since, settle: 2 * m.spec.PollEvery})
	if !n.outbid {
		n.outbid = true
		m.outbids++
		next := "replacing it"
		switch {
		case act == outbidRebid:
			next = fmt.Sprintf("raising the bid to $%.4f/hr", p)
		case m.spec.Bid.OnOutbid == OutbidRebid:
			next = fmt.Sprintf("at its bound (on-demand $%.4f/hr): replacing it", n.offer.DPHBase)
		}
		m.say(Event{Event: EvOutbid, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, State: n.state,
			Msg: fmt.Sprintf("outbid at $%.4f/hr: %s", n.bid, next)})
	}
	switch act {
	case outbidReplace:
		return outbidDo{drop: true}, true
	case outbidRebid:
		return outbidDo{price: p}, true
	}
	return outbidDo{}, true
}

type bidChange struct {
	n     *node
	price float64
}

// changeBids sends the change bids; each one that is accepted sets what
// the node bills and what the store records, so that the caps and the
// cost count the bid paid.
func (r *runner) changeBids(ctx context.Context, cs []bidChange, now time.Time) {
	if len(cs) == 0 {
		return
	}
	ns := make([]*node, len(cs))
	price := make(map[*node]float64, len(cs))
	idx := make(map[*node]int, len(cs))
	for i, c := range cs {
		ns[i], price[c.n], idx[c.n] = c.n, c.price, i
		c.n.rebidAt = now
	}
	ok := make([]bool, len(ns))
	r.parallel(ctx, ns, func(ctx context.Context, n *node) error {
		p := price[n]
		if err := r.f.ChangeBid(ctx, n.id, p); err != nil {
			return fmt.Errorf("change bid to $%.4f/hr: %w", p, err)
		}
		ok[idx[n]] = true
		return nil
	})
	for i, n := range ns {
		if !ok[i] {
			continue
		}
		p := price[n]
		storage := n.offer.DPHTotal - n.bid
		r.emit(Event{Event: EvRebid, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID,
			Msg: fmt.Sprintf("bid raised from $%.4f/hr to $%.4f/hr", n.bid, p)})
		n.bid, n.offer.DPHTotal = p, p+storage
		r.rebids++
		// From now on: the time before the change stays billed at the old bid.
		if err := r.f.ChangeRates(ctx, n.id, p+storage, storage, now); err != nil {
			r.emit(Event{Event: EvWarn, At: now, InstanceID: n.id, Msg: "recording the new bid: " + err.Error()})
		}
	}
}
