package launch

// Renting: how many rentals the launch needs, which candidates fit the
// caps, and the rents themselves, paced by the limiter.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// bootBudget is the load time an offer must be expected to beat to be
// ranked with the others: 60% of the boot timeout, or of the deadline when
// that is sooner, leaving room for a slow day and the release.
func bootBudget(s Spec) time.Duration {
	b := s.BootTimeout
	if s.Deadline > 0 {
		b = min(b, s.Deadline)
	}
	return b * 6 / 10
}

// bootableFirst moves the offers whose estimated load time (pull at their
// download speed, extraction at their disk's, container start) exceeds
// budget behind the others, keeping the ranking within each group:
// renting them mostly buys a boot timeout.
func bootableFirst(cands []market.Ranked, imageGB float64, budget time.Duration) ([]market.Ranked, int) {
	fast := make([]market.Ranked, 0, len(cands))
	var slow []market.Ranked
	for _, c := range cands {
		if plan.LoadTime(imageGB, &c.Offer) > budget {
			slow = append(slow, c)
		} else {
			fast = append(fast, c)
		}
	}
	return append(fast, slow...), len(slow)
}

// dispatch starts rents while the fleet needs them, within the caps, at
// most RentRate per second and Workers at once. Rents run in the background
// (a lost create response can take minutes to settle) and land later. It
// returns how long until the next rent may go, or 0 when none is due.
func (r *runner) dispatch(ctx context.Context) time.Duration {
	defer r.flush(ctx)
	triedBulk := false
	for ctx.Err() == nil {
		now := r.now()
		if r.finishing || r.capHit != "" {
			return 0
		}
		if !bootsInTime(now, r.deadline, r.nextLoad(), r.rentLead()) {
			return 0 // a new rental could not boot before the deadline
		}
		need := r.need(now)
		if need <= 0 {
			return 0
		}
		if r.rentsOK+len(r.inflight) >= r.spec.MaxRentals {
			r.capStop(now, fmt.Sprintf("rental bound: %d rentals made (--max-rentals %d)", r.rentsOK+len(r.inflight), r.spec.MaxRentals))
			return 0
		}
		if r.calls >= r.spec.Workers {
			return time.Duration(float64(time.Second) / r.spec.RentRate)
		}
		if r.bulk && !triedBulk {
			triedBulk = true
			if r.dispatchBulk(ctx, now, need) {
				continue
			}
		}
		if tok := r.lim.TokensAt(now); tok < 1 {
			return time.Duration((1 - tok) / r.spec.RentRate * float64(time.Second))
		}
		picks := r.renting(ctx, r.rents(1, need, now))
		if len(picks) == 0 {
			return 0
		}
		r.lim.AllowN(now, 1)
		c := picks[0]
		r.substitute(now, c)
		r.inflight[c.ID] = c
		r.startCall(func() []rentResult {
			out := rentResult{c: c}
			out.in, out.err = r.f.Rent(ctx, fleet.RentRequest{Fleet: r.spec.Fleet, Offer: c.Offer, Create: r.createFor(c.Offer), ImageGB: r.spec.ImageGB})
			return []rentResult{out}
		})
	}
	return 0
}

// rents plans up to k rents, the best-ranked usable offers within the
// caps (pick), for a fleet that needs more.
func (m *model) rents(k, need int, now time.Time) []Action {
	for _, c := range m.pick(k, now) {
		m.act(Action{Kind: ActRent, Offer: c.ID, Machine: c.MachineID,
			Reason: fmt.Sprintf("ranked %d of %d; the fleet needs %d more loading", m.rankOf(c.ID)+1, len(m.cands), need)})
	}
	return m.take()
}

// renting applies a rent plan's events and returns the offers it rents,
// for the caller to send.
func (r *runner) renting(ctx context.Context, plan []Action) []market.Ranked {
	var out []market.Ranked
	for _, a := range plan {
		if a.Kind == ActRent {
			out = append(out, r.cands[r.rank[a.Offer]])
		}
	}
	r.apply(ctx, plan, r.now())
	return out
}

// startCall runs one create call in the background; its results, one per
// offer it rents, land at a later tick.
func (r *runner) startCall(call func() []rentResult) {
	r.calls++
	r.wg.Add(1)
	r.busy(1)
	go func() {
		defer r.wg.Done()
		defer r.busy(-1)
		res := call()
		res[len(res)-1].lastOfCall = true
		r.resMu.Lock()
		r.results = append(r.results, res...)
		r.resMu.Unlock()
	}()
}

// bulkCallRate paces bulk creates: vast publishes no limit for them, and
// one call a second, 64 offers each, is still 14 times its single creates.
const bulkCallRate = 1

// bulkMin is the smallest batch worth a bulk call: fewer offers go one by
// one, at the single creates' own pace.
const bulkMin = 4

// dispatchBulk rents, with one bulk create, the next offers the fleet needs
// that share a create body (a body carries the bid when bidding). It
// reports whether it sent one.
func (r *runner) dispatchBulk(ctx context.Context, now time.Time, need int) bool {
	if r.bulkLim.TokensAt(now) < 1 {
		return false
	}
	least := min(bulkMin, r.spec.CreateBatch)
	k := min(need, r.spec.CreateBatch, r.spec.MaxRentals-r.rentsOK-len(r.inflight))
	if k < 2 || k < least {
		return false
	}
	picks := r.renting(ctx, r.rents(k, need, now))
	groups := bulkGroups(picks, r.createFor)
	var batch []market.Ranked
	for _, g := range groups {
		if batch == nil && len(g) >= least {
			batch = g
			continue
		}
		for _, c := range g { // the single creates take them in turn
			delete(r.usedOffers, c.ID)
			r.unreserve(c)
		}
	}
	if batch == nil {
		return false
	}
	r.bulkLim.AllowN(now, 1)
	offers := make([]market.Offer, len(batch))
	for i, c := range batch {
		r.substitute(now, c)
		r.inflight[c.ID] = c
		offers[i] = c.Offer
	}
	r.startCall(func() []rentResult {
		outs, err := r.f.RentMany(ctx, fleet.BulkRentRequest{Fleet: r.spec.Fleet, Offers: offers, Create: r.createFor(offers[0]), ImageGB: r.spec.ImageGB})
		res := make([]rentResult, len(batch))
		for i, c := range batch {
			res[i] = rentResult{c: c, err: err}
			if err == nil {
				res[i].in, res[i].err = outs[i].Instance, outs[i].Err
			}
		}
		return res
	})
	return true
}

// bulkGroups splits picks into groups that one bulk create can rent: one
// create body, distinct known machines. The largest group comes first.
func bulkGroups(picks []market.Ranked, body func(market.Offer) provider.CreateRequest) [][]market.Ranked {
	type slot struct {
		key      string
		machines map[int64]bool
	}
	var groups [][]market.Ranked
	var slots []slot
	for _, c := range picks {
		b, err := json.Marshal(body(c.Offer))
		if err != nil || c.MachineID <= 0 {
			groups = append(groups, []market.Ranked{c})
			slots = append(slots, slot{})
			continue
		}
		key, placed := string(b), false
		for i, s := range slots {
			if s.key == key && !s.machines[c.MachineID] && len(groups[i]) < provider.BulkChunk {
				groups[i] = append(groups[i], c)
				s.machines[c.MachineID] = true
				placed = true
				break
			}
		}
		if !placed {
			groups = append(groups, []market.Ranked{c})
			slots = append(slots, slot{key: key, machines: map[int64]bool{c.MachineID: true}})
		}
	}
	slices.SortStableFunc(groups, func(a, b []market.Ranked) int { return len(b) - len(a) })
	return groups
}

// keep is cands less the offers a not accepted; all of them when a is nil.
func (a *Accepted) keep(cands []market.Ranked) []market.Ranked {
	if a == nil {
		return cands
	}
	out := make([]market.Ranked, 0, len(a.Est))
	for _, c := range cands {
		if _, ok := a.Est[c.ID]; ok {
			out = append(out, c)
		}
	}
	return out
}

// substitute says, before c is rented, that c is not the offer the user
// was announced, and what running on it is estimated to cost against the
// announced estimate: a hedge beside the announced instance, or a
// replacement for it.
func (m *model) substitute(now time.Time, c market.Ranked) {
	a := m.spec.Accepted
	if a == nil || c.ID == a.Offer {
		return
	}
	role := "replacement for"
	for _, n := range m.nodes {
		if n.offerID == a.Offer && !n.doomed {
			role = "hedge beside"
		}
	}
	if _, ok := m.inflight[a.Offer]; ok {
		role = "hedge beside"
	}
	m.say(Event{Event: EvSubstitute, At: now, OfferID: c.ID, MachineID: c.MachineID,
		Msg: fmt.Sprintf("%s the announced offer %d: offer %d, %dx %s at $%.3f/hr (announced $%.3f/hr), estimated $%.2f against $%.2f announced",
			role, a.Offer, c.ID, c.NumGPUs, c.GPUName, c.DPHTotal, m.byOff[a.Offer].DPHTotal, a.Est[c.ID], a.Est[a.Offer])})
}

type rentResult struct {
	c          market.Ranked
	in         store.Instance
	err        error
	lastOfCall bool // the create call that rented c has no more results
}

// land takes in the rents that finished since the last tick.
func (r *runner) land(ctx context.Context) {
	r.resMu.Lock()
	res := r.results
	r.results = nil
	r.resMu.Unlock()
	for _, out := range res {
		c := out.c
		delete(r.inflight, c.ID)
		if out.lastOfCall {
			r.calls--
		}
		r.unreserve(c) // track re-adds the machine when the rent worked
		at := r.now()
		if out.err != nil {
			if ctx.Err() == nil {
				r.emit(Event{Event: EvRentFailed, At: at, OfferID: c.ID, MachineID: c.MachineID, Msg: out.err.Error()})
			}
			if errors.Is(out.err, provider.ErrInsufficientBalance) || errors.Is(out.err, provider.ErrAuth) {
				r.capStop(at, "account: "+out.err.Error())
				r.flush(ctx)
			}
			continue
		}
		if _, ok := r.nodes[out.in.ID]; ok {
			continue // adopted meanwhile
		}
		r.rentsOK++
		n := r.track(out.in)
		msg := ""
		if r.rentsOK > r.spec.Count {
			msg = "replacement #" + strconv.Itoa(r.rentsOK-r.spec.Count)
		}
		r.emit(Event{Event: EvRented, At: at, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, Msg: msg})
	}
}

// need is how many rents the fleet needs now. Without backfill, each asked
// slot gets one rental; with it, slots that failed or are hedged (loading
// past HedgeAfter) are refilled.
func (m *model) need(now time.Time) int {
	if !m.spec.Backfill {
		return m.spec.Count - m.rentsOK - len(m.inflight)
	}
	// Late nodes give up their slot only while a spare could still boot
	// in time; after that a spare is a pull that buys nothing.
	load, lead := m.nextLoad(), m.rentLead()
	hedge := m.spec.HedgeAfter >= 0 && bootsInTime(now, m.deadline, load, lead)
	booted, loading := 0, len(m.inflight)
	for _, n := range m.nodes {
		switch {
		case n.doomed:
		case n.phase != phBooting:
			booted++
		case hedge && !n.gated() && now.Sub(n.rentedAt) > m.lateAfter(n.load):
		default:
			loading++
		}
	}
	return loadingWanted(m.target(), booted, m.bootShare(now, load, lead)) - loading
}

// nextLoad is how long the next rental is expected to take to be ready:
// the estimated load time of the best usable candidate, corrected by how
// this launch's boots compared with their estimates, and the time its
// nodes take through the readiness gates.
func (m *model) nextLoad() time.Duration {
	for _, c := range m.cands {
		if m.usable(c) {
			return time.Duration(float64(plan.LoadTime(m.spec.ImageGB, &c.Offer))*m.ratio) + m.gateTime
		}
	}
	return 0
}

// rentLead is how long before the deadline a new rental must run: the
// release lead while the fleet is parked, else one poll.
func (m *model) rentLead() time.Duration {
	if m.spec.Park && !m.released {
		return m.releaseLead()
	}
	return m.spec.PollEvery
}

// liveDPH is the $/hr of every live node, as rented.
func (m *model) liveDPH() float64 {
	s := 0.0
	for _, n := range m.nodes {
		s += n.offer.DPHTotal
	}
	for _, c := range m.inflight {
		s += c.DPHTotal
	}
	for _, d := range m.goingDPH {
		s += d
	}
	return s
}

func (m *model) remaining(now time.Time) time.Duration {
	if !m.deadline.IsZero() {
		return max(0, m.deadline.Sub(now))
	}
	return horizon(m.spec)
}

// pick chooses up to k candidates in rank order that fit the caps, and
// reserves their offers and machines.
func (m *model) pick(k int, now time.Time) []market.Ranked {
	dph := m.liveDPH()
	rem := m.remaining(now).Hours()
	committed := m.committed(now, dph, rem)
	var out []market.Ranked
	blockedDPH, blockedBudget := false, false
	for _, c := range m.cands {
		if len(out) == k {
			break
		}
		if !m.usable(c) {
			continue
		}
		if m.spec.MaxDPH > 0 && dph+c.DPHTotal > m.spec.MaxDPH+1e-9 {
			blockedDPH = true
			continue
		}
		if !m.fitsBudget(committed, c, rem) {
			blockedBudget = true
			continue
		}
		out = append(out, c)
		m.usedOffers[c.ID] = true
		m.machines[c.MachineID]++
		dph += c.DPHTotal
		committed += c.DPHTotal*rem + c.PullCost(m.spec.ImageGB)
	}
	if len(out) < k {
		switch {
		case blockedBudget && m.budgetHeld == "":
			// Not sticky either: the committed part shrinks as the deadline
			// nears and as failed instances are destroyed.
			m.budgetHeld = fmt.Sprintf("budget cap $%.2f: a rental would bring spent + committed above it", m.spec.Budget)
			m.say(Event{Event: EvCap, At: now, Msg: "rent held back by the " + m.budgetHeld})
		case blockedDPH && m.dphCapped == "":
			// Not sticky: destroying a failed instance frees room under
			// the cap, and the next pick may fit.
			m.dphCapped = fmt.Sprintf("max-dph cap $%.3f/hr: no remaining offer fits under it", m.spec.MaxDPH)
			m.say(Event{Event: EvCap, At: now, Msg: "rent held back by the " + m.dphCapped})
		}
	}
	return out
}

// committed is what the launch has spent and would spend if everything
// live (at dph $/hr) ran for rem hours more: spent, the bandwidth billed
// and still pulling, and the pulls of rents in flight (not tracked until
// they land).
func (m *model) committed(now time.Time, dph, rem float64) float64 {
	bw, pending := m.bandwidth(now)
	committed := m.spent + bw + pending + dph*rem
	for _, c := range m.inflight {
		committed += c.PullCost(m.spec.ImageGB)
	}
	return committed
}

// budgetFits says whether some usable candidate could be rented now
// within the budget: while none can, the launch counts as unable to rent.
func (m *model) budgetFits(now time.Time) bool {
	if m.spec.Budget <= 0 {
		return true
	}
	rem := m.remaining(now).Hours()
	committed := m.committed(now, m.liveDPH(), rem)
	for _, c := range m.cands {
		if m.usable(c) && m.fitsBudget(committed, c, rem) {
			return true
		}
	}
	return false
}

// fitsBudget says whether renting c, running rem hours more and pulling
// the image, keeps committed within the budget (none: always).
func (m *model) fitsBudget(committed float64, c market.Ranked, rem float64) bool {
	return m.spec.Budget <= 0 || committed+c.DPHTotal*rem+c.PullCost(m.spec.ImageGB) <= m.spec.Budget+1e-9
}

func (m *model) unreserve(c market.Ranked) {
	if m.machines[c.MachineID]--; m.machines[c.MachineID] <= 0 {
		delete(m.machines, c.MachineID)
	}
}

func (m *model) usable(c market.Ranked) bool {
	return !m.usedOffers[c.ID] && !m.bad[c.MachineID] && c.DPHTotal > 0 &&
		(m.spec.AllowSameMachine || m.machines[c.MachineID] == 0)
}

func (m *model) moreCandidates() bool {
	for _, c := range m.cands {
		if m.usable(c) {
			return true
		}
	}
	return false
}
