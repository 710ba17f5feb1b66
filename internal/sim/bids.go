package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"
)

// Interruptible rentals. Other renters bid on each offer too: in any one
// bidWindow a rival appears with rivalShare (Faults.RivalShare when set),
// bidding between min_bid and twice it. A rival above an instance's price
// stops it without notice (vast-api.md §11: stopped, data kept; the listing
// shows actual_status stopped, intended_status running); raising the bid
// (change bid) wins it back, and so does the rival leaving: the instance
// resumes by itself at the start of the first window without a rival above
// it. Rivals are drawn by offer and window, so every client sees the same
// auction.
const (
	bidWindow  = 30 * time.Minute
	rivalShare = 0.15
	// bidHorizon bounds the search for the next rival that wins.
	bidHorizon = 14 * 24 * time.Hour
)

// bidWindowOf is the auction window t falls in.
func bidWindowOf(t time.Time) int64 { return t.Unix() / int64(bidWindow/time.Second) }

// listedMinBid is the min_bid the offer lists at now: vast's "current
// minimum bid", the price that wins the machine. It is the machine's floor,
// or just above the rival bidding in this window when there is one, so it
// moves with the other renters' demand every half hour. A rival's bid is
// listed from the start of its window and takes the machine from lower
// bids at a drawn time within it: a bid that beats the listed price is not
// outbid until a later window.
func (m *Market) listedMinBid(o *Offer, now time.Time) float64 {
	if r := m.rivalBid(o.ID, bidWindowOf(now)); r > 0 {
		return round4(math.Max(o.MinBid, r+0.001))
	}
	return o.MinBid
}

// rivalBid is the highest other bid on the offer in window w, 0 for none.
func (m *Market) rivalBid(offerID, w int64) float64 {
	share := rivalShare
	if f := m.cfg.Faults.RivalShare; f > 0 {
		share = f
	}
	if draw(m.st.Seed, drawRival, offerID, w) >= share {
		return 0
	}
	o := &m.offers[m.byID[offerID]]
	return round4(o.MinBid * (1 + draw(m.st.Seed, drawRival, offerID, w<<1|1)))
}

// outbidAt is when a rival first outbids price on the offer at or after
// from; zero when none does within bidHorizon.
func (m *Market) outbidAt(offerID int64, price float64, from time.Time) time.Time {
	first := from.Unix() / int64(bidWindow/time.Second)
	for w := first; w < first+int64(bidHorizon/bidWindow); w++ {
		if m.rivalBid(offerID, w) <= price {
			continue
		}
		at := time.Unix(w*int64(bidWindow/time.Second), 0).UTC().Add(time.Duration(draw(m.st.Seed, drawRival, offerID, w<<1) * float64(bidWindow)))
		if at.Before(from) {
			at = from
		}
		return at
	}
	return time.Time{}
}

// regainAt is when an instance bidding price, outbid at from, gets its
// machine back: the start of the first later window whose rival bids no
// more than price; zero when none does within bidHorizon.
func (m *Market) regainAt(offerID int64, price float64, from time.Time) time.Time {
	first := from.Unix()/int64(bidWindow/time.Second) + 1
	for w := first; w < first+int64(bidHorizon/bidWindow); w++ {
		if m.rivalBid(offerID, w) <= price {
			return time.Unix(w*int64(bidWindow/time.Second), 0).UTC()
		}
	}
	return time.Time{}
}

// regain starts an outbid instance again at t, as vast does once it
// regains priority (vast-api.md §11).
func (m *Market) regain(in *instance, t time.Time) {
	in.Outbid, in.RegainAt = false, time.Time{}
	in.Status = "loading"
	in.StatusMsg = "Starting container"
	in.ReadyAt = t.Add(time.Duration((10 + 30*draw(m.st.Seed, drawRestart, in.fate(), in.Starts)) * float64(time.Second)))
	if in.Fault == "stuck" {
		in.ReadyAt = time.Time{}
	}
	in.OutbidAt = m.outbidAt(in.OfferID, in.ComputeRate, t)
	in.log(t, "no rival above $%.4f/h any more: starting again", in.ComputeRate)
}

// winningBid is what a null price in change bid means: just above the
// offer's minimum and the rival bidding now.
func (m *Market) winningBid(offerID int64, now time.Time) float64 {
	o := &m.offers[m.byID[offerID]]
	return round4(math.Max(o.MinBid, m.rivalBid(offerID, bidWindowOf(now))) + 0.001)
}

// outbid stops the instance at t: a rival took the machine.
func (in *instance) outbid(t time.Time) {
	in.Status = "stopped"
	in.Outbid = true
	in.StatusMsg = "Outbid: a higher bid holds the machine; raise your bid (change bid) to resume"
	in.ReadyAt, in.LoadingAt, in.OfflineAt, in.OutbidAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	in.StoppedAt = t
	in.log(t, "outbid at $%.4f/h: stopped", in.ComputeRate)
}

// changeBid sets an interruptible instance's price; an instance stopped by
// an outbid resumes when the new price beats the rival bidding now.
func (m *Market) changeBid(id int64, price *float64, now time.Time) error {
	in := m.find(id)
	if in == nil {
		return noInstance(id)
	}
	if !in.Bid {
		return &apiError{400, "invalid_args", fmt.Sprintf("Instance %d is on-demand, not interruptible: it has no bid to change.", id)}
	}
	o := &m.offers[m.byID[in.OfferID]]
	p := m.winningBid(in.OfferID, now)
	if price != nil {
		p = *price
	}
	if hi := 32 * float64(o.NumGPUs); p < 0.001 || p > hi {
		return &apiError{400, "invalid_price", fmt.Sprintf("price must be between 0.001 and %g $/h", hi)}
	}
	if p < o.MinBid {
		return belowMinBid(p, o.MinBid)
	}
	in.ComputeRate = p
	in.log(now, "bid changed to $%.4f/h", p)
	if in.TakenBy != 0 && in.Outbid && in.Intended == "running" {
		// Taken by the account's own instance: the machine comes back
		// only when the new bid beats that one's.
		taker := m.find(in.TakenBy)
		if taker != nil && taker.Status != "stopped" {
			if !taker.Bid || p <= taker.ComputeRate {
				return nil
			}
			taker.takenBy(in, now)
		}
		in.TakenBy = 0
		m.regain(in, now)
		return nil
	}
	switch {
	case in.Outbid && in.Intended == "running":
		if at := m.outbidAt(in.OfferID, p, now); at.Equal(now) {
			in.RegainAt = m.regainAt(in.OfferID, p, now)
		} else {
			in.Outbid, in.RegainAt = false, time.Time{}
			in.Status = "loading"
			in.StatusMsg = "Starting container"
			in.ReadyAt = now.Add(time.Duration((10 + 30*draw(m.st.Seed, drawRestart, in.fate(), in.Starts)) * float64(time.Second)))
			in.OutbidAt = at
		}
	case in.Status != "stopped" && in.Status != "exited" && in.Status != "offline":
		in.OutbidAt = m.outbidAt(in.OfferID, p, now)
	}
	return nil
}

func belowMinBid(p, minBid float64) error {
	return &apiError{400, "invalid_price", fmt.Sprintf("Your bid of $%.4f/h is below this machine's minimum bid of $%.4f/h.", p, minBid)}
}

func (m *Market) hChangeBid(r *http.Request, body []byte, now time.Time) reply {
	id, _ := pathID(r)
	var req struct {
		Price *float64 `json:"price"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badArgs("invalid body: %v", err)
	}
	if err := m.changeBid(id, req.Price, now); err != nil {
		return errReply(err)
	}
	return okReply()
}

// preemptFor is what a create on o at price (nil: on-demand) must stop of
// the account's own instances on o's machine: whoever holds o itself, and
// then the interruptible ones bidding least, until the new one fits. Only
// a lower bid gives way; a holder it cannot displace (on-demand, or a bid
// at least as high) refuses the create.
func (m *Market) preemptFor(o *Offer, price *float64) ([]*instance, error) {
	var same, others []*instance
	used := 0
	for _, in := range m.st.Instances {
		if in.Destroyed || in.Status == "stopped" {
			continue
		}
		ho := &m.offers[m.byID[in.OfferID]]
		if ho.MachineID != o.MachineID {
			continue
		}
		used += ho.NumGPUs
		if in.OfferID == o.ID {
			same = append(same, in)
		} else {
			others = append(others, in)
		}
	}
	fits := func() bool { return used+o.NumGPUs <= MachineGPUs(o) }
	if len(same) == 0 && fits() {
		return nil, nil
	}
	beats := func(h *instance) bool { return h.Bid && (price == nil || *price > h.ComputeRate) }
	refuse := func(h *instance) error {
		if price != nil && h.Bid {
			return &apiError{400, "invalid_price", fmt.Sprintf("Your bid of $%.4f/h does not beat the $%.4f/h bid that holds this machine: bid more.", *price, h.ComputeRate)}
		}
		return &apiError{404, "no_such_ask", fmt.Sprintf("Offer %d is no longer available: it was rented by another client.", o.ID)}
	}
	var out []*instance
	for _, h := range same {
		if !beats(h) {
			return nil, refuse(h)
		}
		out = append(out, h)
		used -= o.NumGPUs
	}
	slices.SortFunc(others, func(a, b *instance) int { return cmp.Compare(a.ComputeRate, b.ComputeRate) })
	for _, h := range others {
		if fits() {
			break
		}
		if !beats(h) {
			return nil, refuse(h)
		}
		out = append(out, h)
		used -= m.offers[m.byID[h.OfferID]].NumGPUs
	}
	if !fits() {
		return nil, refuse(&instance{})
	}
	return out, nil
}

// takenBy stops in: taker, a higher bid or an on-demand rental of the
// same account, took its machine. It resumes when taker lets go.
func (in *instance) takenBy(taker *instance, t time.Time) {
	in.outbid(t)
	in.TakenBy = taker.ID
	in.RegainAt = time.Time{}
	in.StatusMsg = fmt.Sprintf("Outbid: instance %d took the machine; it resumes when that one stops, or raise your bid (change bid)", taker.ID)
}
