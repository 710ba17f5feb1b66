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
	triedBulk := false
	for ctx.Err() == nil {
		now := r.now()
		if r.finishing || r.capHit != "" {
			return 0
		}
		if !bootsInTime(now, r.deadline, r.nextLoad(), r.rentLead()) {
			return 0 // a new rental could not boot before the deadline
		}
		if r.need(now) <= 0 {
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
			if r.dispatchBulk(ctx, now) {
				continue
			}
		}
		if tok := r.lim.TokensAt(now); tok < 1 {
			return time.Duration((1 - tok) / r.spec.RentRate * float64(time.Second))
		}
		picks := r.pick(1, now)
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
func (r *runner) dispatchBulk(ctx context.Context, now time.Time) bool {
	if r.bulkLim.TokensAt(now) < 1 {
		return false
	}
	least := min(bulkMin, r.spec.CreateBatch)
	k := min(r.need(now), r.spec.CreateBatch, r.spec.MaxRentals-r.rentsOK-len(r.inflight))
	if k < 2 || k < least {
		return false
	}
	picks := r.pick(k, now)
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
func (r *runner) substitute(now time.Time, c market.Ranked) {
	a := r.spec.Accepted
	if a == nil || c.ID == a.Offer {
		return
	}
	role := "replacement for"
	for _, n := range r.nodes {
		if n.offerID == a.Offer && !n.doomed {
			role = "hedge beside"
		}
	}
	if _, ok := r.inflight[a.Offer]; ok {
		role = "hedge beside"
	}
	r.emit(Event{Event: EvSubstitute, At: now, OfferID: c.ID, MachineID: c.MachineID,
		Msg: fmt.Sprintf("%s the announced offer %d: offer %d, %dx %s at $%.3f/hr (announced $%.3f/hr), estimated $%.2f against $%.2f announced",
			role, a.Offer, c.ID, c.NumGPUs, c.GPUName, c.DPHTotal, r.byOff[a.Offer].DPHTotal, a.Est[c.ID], a.Est[a.Offer])})
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
func (r *runner) need(now time.Time) int {
	if !r.spec.Backfill {
		return r.spec.Count - r.rentsOK - len(r.inflight)
	}
	// Late nodes give up their slot only while a spare could still boot
	// in time; after that a spare is a pull that buys nothing.
	load, lead := r.nextLoad(), r.rentLead()
	hedge := r.spec.HedgeAfter >= 0 && bootsInTime(now, r.deadline, load, lead)
	booted, loading := 0, len(r.inflight)
	for _, n := range r.nodes {
		switch {
		case n.doomed:
		case n.phase != phBooting:
			booted++
		case hedge && !n.gated() && now.Sub(n.rentedAt) > r.lateAfter(n.load):
		default:
			loading++
		}
	}
	return loadingWanted(r.target(), booted, r.bootShare(now, load, lead)) - loading
}

// nextLoad is how long the next rental is expected to take to be ready:
// the estimated load time of the best usable candidate, corrected by how
// this launch's boots compared with their estimates, and the time its
// nodes take through the readiness gates.
func (r *runner) nextLoad() time.Duration {
	for _, c := range r.cands {
		if r.usable(c) {
			return time.Duration(float64(plan.LoadTime(r.spec.ImageGB, &c.Offer))*r.ratio) + r.gateTime
		}
	}
	return 0
}

// rentLead is how long before the deadline a new rental must run: the
// release lead while the fleet is parked, else one poll.
func (r *runner) rentLead() time.Duration {
	if r.spec.Park && !r.released {
		return r.releaseLead()
	}
	return r.spec.PollEvery
}

// liveDPH is the $/hr of every live node, as rented.
func (r *runner) liveDPH() float64 {
	s := 0.0
	for _, n := range r.nodes {
		s += n.offer.DPHTotal
	}
	for _, c := range r.inflight {
		s += c.DPHTotal
	}
	for _, d := range r.goingDPH {
		s += d
	}
	return s
}

func (r *runner) remaining(now time.Time) time.Duration {
	if !r.deadline.IsZero() {
		return max(0, r.deadline.Sub(now))
	}
	return horizon(r.spec)
}

// pick chooses up to k candidates in rank order that fit the caps, and
// reserves their offers and machines.
func (r *runner) pick(k int, now time.Time) []market.Ranked {
	dph := r.liveDPH()
	rem := r.remaining(now).Hours()
	committed := r.committed(now, dph, rem)
	var out []market.Ranked
	blockedDPH, blockedBudget := false, false
	for _, c := range r.cands {
		if len(out) == k {
			break
		}
		if !r.usable(c) {
			continue
		}
		if r.spec.MaxDPH > 0 && dph+c.DPHTotal > r.spec.MaxDPH+1e-9 {
			blockedDPH = true
			continue
		}
		if !r.fitsBudget(committed, c, rem) {
			blockedBudget = true
			continue
		}
		out = append(out, c)
		r.usedOffers[c.ID] = true
		r.machines[c.MachineID]++
		dph += c.DPHTotal
		committed += c.DPHTotal*rem + c.PullCost(r.spec.ImageGB)
	}
	if len(out) < k {
		switch {
		case blockedBudget && r.budgetHeld == "":
			// Not sticky either: the committed part shrinks as the deadline
			// nears and as failed instances are destroyed.
			r.budgetHeld = fmt.Sprintf("budget cap $%.2f: a rental would bring spent + committed above it", r.spec.Budget)
			r.emit(Event{Event: EvCap, At: now, Msg: "rent held back by the " + r.budgetHeld})
		case blockedDPH && r.dphCapped == "":
			// Not sticky: destroying a failed instance frees room under
			// the cap, and the next pick may fit.
			r.dphCapped = fmt.Sprintf("max-dph cap $%.3f/hr: no remaining offer fits under it", r.spec.MaxDPH)
			r.emit(Event{Event: EvCap, At: now, Msg: "rent held back by the " + r.dphCapped})
		}
	}
	return out
}

// committed is what the launch has spent and would spend if everything
// live (at dph $/hr) ran for rem hours more: spent, the bandwidth billed
// and still pulling, and the pulls of rents in flight (not tracked until
// they land).
func (r *runner) committed(now time.Time, dph, rem float64) float64 {
	bw, pending := r.bandwidth(now)
	committed := r.spent + bw + pending + dph*rem
	for _, c := range r.inflight {
		committed += c.PullCost(r.spec.ImageGB)
	}
	return committed
}

// budgetFits says whether some usable candidate could be rented now
// within the budget: while none can, the launch counts as unable to rent.
func (r *runner) budgetFits(now time.Time) bool {
	if r.spec.Budget <= 0 {
		return true
	}
	rem := r.remaining(now).Hours()
	committed := r.committed(now, r.liveDPH(), rem)
	for _, c := range r.cands {
		if r.usable(c) && r.fitsBudget(committed, c, rem) {
			return true
		}
	}
	return false
}

// fitsBudget says whether renting c, running rem hours more and pulling
// the image, keeps committed within the budget (none: always).
func (r *runner) fitsBudget(committed float64, c market.Ranked, rem float64) bool {
	return r.spec.Budget <= 0 || committed+c.DPHTotal*rem+c.PullCost(r.spec.ImageGB) <= r.spec.Budget+1e-9
}

func (r *runner) unreserve(c market.Ranked) {
	if r.machines[c.MachineID]--; r.machines[c.MachineID] <= 0 {
		delete(r.machines, c.MachineID)
	}
}

func (r *runner) usable(c market.Ranked) bool {
	return !r.usedOffers[c.ID] && !r.bad[c.MachineID] && c.DPHTotal > 0 &&
		(r.spec.AllowSameMachine || r.machines[c.MachineID] == 0)
}

func (r *runner) moreCandidates() bool {
	for _, c := range r.cands {
		if r.usable(c) {
			return true
		}
	}
	return false
}
