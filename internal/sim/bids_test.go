package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
)

// TestBidsFollowTheAuction: a bid below min_bid is refused; one at min_bid
// is stopped without notice when a rival outbids it, and the listing says
// so; change bid with a null price wins the machine back; a bid above every
// rival runs on.
func TestBidsFollowTheAuction(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 21, Balance: 1e6})
	offers := h.search(`{"rentable":{"eq":true},"order":[["dph_total","asc"]],"type":"bid","allocated_storage":20,"limit":2}`)
	bid := func(o int, price float64) (int, int64, string) {
		var out struct {
			NewContract int64  `json:"new_contract"`
			Error       string `json:"error"`
		}
		st, _, body := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", offers[o].ID), map[string]any{"image": "ubuntu:22.04", "disk": 20, "price": price}, &out)
		return st, out.NewContract, string(body)
	}
	if st, _, body := bid(0, offers[0].MinBid*0.9); st != 400 || !strings.Contains(body, "invalid_price") || !strings.Contains(body, "minimum bid") {
		t.Fatalf("bid below min_bid: %d %s", st, body)
	}
	st, low, body := bid(0, offers[0].MinBid)
	if st != 200 {
		t.Fatalf("bid at min_bid: %d %s", st, body)
	}
	st, high, body := bid(1, 2*offers[1].MinBid+0.01)
	if st != 200 {
		t.Fatalf("bid above every rival: %d %s", st, body)
	}
	var outbid *provider.Instance
	for range 48 * 4 * 6 { // up to 4 days, in steps shorter than a rival's window (an outbid instance resumes when its rival leaves)
		h.clock.Advance(5 * time.Minute)
		if in := h.show(low); in.Status() == provider.StateStopped {
			outbid = in
			break
		}
	}
	if outbid == nil {
		t.Fatal("a bid at min_bid was never outbid in 4 days")
	}
	if outbid.IntendedStatus != "running" || !strings.Contains(outbid.StatusMsg, "Outbid") {
		t.Errorf("outbid instance: intended %q, %q", outbid.IntendedStatus, outbid.StatusMsg)
	}
	if in := h.show(high); in.Status() != provider.StateRunning {
		t.Errorf("the high bid: %q %q", in.Status(), in.StatusMsg)
	}
	if st, _, body := h.do("PUT", fmt.Sprintf("/api/v0/instances/bid_price/%d/", low), map[string]any{"client_id": "me", "price": offers[0].MinBid / 2}, nil); st != 400 {
		t.Errorf("change bid below min_bid: %d %s", st, body)
	}
	if st, _, body := h.do("PUT", fmt.Sprintf("/api/v0/instances/bid_price/%d/", low), map[string]any{"client_id": "me", "price": nil}, nil); st != 200 {
		t.Fatalf("change bid to a winning price: %d %s", st, body)
	}
	h.clock.Advance(time.Minute)
	if in := h.show(low); in.Status() != provider.StateRunning {
		t.Errorf("after raising the bid: %q %q", in.Status(), in.StatusMsg)
	}
	demand := h.create(h.search(`{"rentable":{"eq":true},"order":[["dph_total","asc"]],"type":"on-demand","allocated_storage":20,"limit":1}`)[0].ID, "od")
	if st, _, body := h.do("PUT", fmt.Sprintf("/api/v0/instances/bid_price/%d/", demand), map[string]any{"client_id": "me", "price": 1}, nil); st != 400 {
		t.Errorf("change bid of an on-demand instance: %d %s", st, body)
	}
}

// TestOutbidResumesWhenTheRivalLeaves: an outbid instance waits stopped,
// still meant to run, and starts again by itself once no rival bids above
// it (vast-api.md §11), billing storage only meanwhile.
func TestOutbidResumesWhenTheRivalLeaves(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 23, Balance: 1e6, Faults: Faults{RivalShare: 0.5}})
	o := h.search(`{"rentable":{"eq":true},"order":[["dph_total","asc"]],"type":"bid","allocated_storage":20,"limit":1}`)[0]
	var out struct {
		NewContract int64 `json:"new_contract"`
	}
	if st, _, body := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", o.ID), map[string]any{"image": "ubuntu:22.04", "disk": 20, "price": o.MinBid}, &out); st != 200 {
		t.Fatalf("bid at min_bid: %d %s", st, body)
	}
	id := out.NewContract
	var outbidAt, resumedAt time.Time
	for range 12 * 48 { // up to 2 days in 5-minute steps
		h.clock.Advance(5 * time.Minute)
		in := h.show(id)
		switch st := in.Status(); {
		case outbidAt.IsZero() && st == provider.StateStopped:
			outbidAt = h.clock.Now()
			if in.IntendedStatus != "running" || !strings.Contains(in.StatusMsg, "Outbid") {
				t.Fatalf("outbid instance: intended %q, %q", in.IntendedStatus, in.StatusMsg)
			}
		case !outbidAt.IsZero() && st != provider.StateStopped:
			resumedAt = h.clock.Now()
		}
		if !resumedAt.IsZero() {
			break
		}
	}
	if outbidAt.IsZero() || resumedAt.IsZero() {
		t.Fatalf("outbid at %v, resumed at %v: want both within 2 days at a 50%% rival share", outbidAt, resumedAt)
	}
	if resumedAt.Sub(outbidAt) > 0 && resumedAt.Truncate(30*time.Minute).Equal(outbidAt.Truncate(30*time.Minute)) {
		t.Errorf("resumed at %v within the rival's half hour (outbid at %v)", resumedAt, outbidAt)
	}
}

// TestRateLimitFollowsRequestRate: a key that sends its burst at one market
// instant is refused with 429 until the market's clock refills its bucket.
func TestRateLimitFollowsRequestRate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 22, Faults: Faults{RateLimit: 2, RateBurst: 5}})
	get := func() int {
		st, _, _ := h.do("GET", "/api/v0/users/current", nil, nil)
		return st
	}
	for i := range 5 {
		if st := get(); st != 200 {
			t.Fatalf("request %d of the burst: %d", i+1, st)
		}
	}
	if st := get(); st != 429 {
		t.Fatalf("request past the burst: %d, want 429", st)
	}
	h.clock.Advance(time.Second) // two tokens back
	if a, b, c := get(), get(), get(); a != 200 || b != 200 || c != 429 {
		t.Errorf("a market second later: %d %d %d, want 200 200 429", a, b, c)
	}
	h.clock.Advance(time.Hour)
	for i := range 5 {
		if st := get(); st != 200 {
			t.Fatalf("after an hour, request %d: %d", i+1, st)
		}
	}
}

// TestOwnBidsGiveWay: on one machine, on-demand beats interruptible and a
// higher bid beats a lower one; an equal bid is refused with the price to
// beat; the displaced instance resumes when the one that took its machine
// lets go, or when it bids more. (Rivals are switched off: only the
// account's own instances compete.)
func TestOwnBidsGiveWay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 21, Balance: 1e6, Faults: Faults{RivalShare: 1e-12}})
	o := h.search(`{"rentable":{"eq":true},"order":[["dph_total","asc"]],"type":"bid","allocated_storage":20,"limit":1}`)[0]
	create := func(price any) (int, int64, string) {
		var out struct {
			NewContract int64 `json:"new_contract"`
		}
		st, _, body := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", o.ID), map[string]any{"image": "ubuntu:22.04", "disk": 20, "price": price}, &out)
		return st, out.NewContract, string(body)
	}
	running := func(id int64) {
		t.Helper()
		h.clock.Advance(time.Hour)
		if in := h.show(id); in.Status() != provider.StateRunning {
			t.Fatalf("instance %d: %q %q, want running", id, in.Status(), in.StatusMsg)
		}
	}
	taken := func(id, by int64) {
		t.Helper()
		in := h.show(id)
		if in.Status() != provider.StateStopped || in.IntendedStatus != "running" || !strings.Contains(in.StatusMsg, fmt.Sprintf("instance %d took the machine", by)) {
			t.Fatalf("instance %d: %q/%q %q, want stopped, taken by %d", id, in.Status(), in.IntendedStatus, in.StatusMsg, by)
		}
	}
	p := o.MinBid
	st, low, body := create(p)
	if st != 200 {
		t.Fatalf("bid at min_bid: %d %s", st, body)
	}
	running(low)
	if st, _, body := create(p); st != 400 || !strings.Contains(body, "invalid_price") || !strings.Contains(body, fmt.Sprintf("$%.4f/h bid that holds this machine", p)) {
		t.Fatalf("an equal bid: %d %s, want 400 naming the bid to beat", st, body)
	}
	st, high, body := create(p + 0.01)
	if st != 200 {
		t.Fatalf("a higher bid: %d %s", st, body)
	}
	taken(low, high)
	running(high)
	// The lower bid raises its bid above the higher one's: it takes the
	// machine back.
	if st, _, body := h.do("PUT", fmt.Sprintf("/api/v0/instances/bid_price/%d/", low), map[string]any{"client_id": "me", "price": p + 0.02}, nil); st != 200 {
		t.Fatalf("change bid: %d %s", st, body)
	}
	taken(high, low)
	running(low)
	// On-demand beats every bid, and nothing outbids it.
	st, od, body := create(nil)
	if st != 200 {
		t.Fatalf("on-demand over a bid: %d %s", st, body)
	}
	taken(low, od)
	if st, _, body := create(p + 1); st != 404 || !strings.Contains(body, "no_such_ask") {
		t.Fatalf("a bid over on-demand: %d %s, want no_such_ask", st, body)
	}
	running(od)
	// The on-demand instance goes: the bids it displaced come back, the
	// highest first (one offer, one machine: the other waits on it).
	if st, _, body := h.do("DELETE", fmt.Sprintf("/api/v0/instances/%d/", od), nil, nil); st != 200 {
		t.Fatalf("destroy: %d %s", st, body)
	}
	running(low)
	taken(high, low)
}

// TestMinBidMovesWithDemand: the listed min_bid is vast's current minimum
// bid. In a half hour with a rival it sits just above the rival's bid, a
// create below it is refused with that price, and one at it is not outbid
// before the window ends; the next window lists the floor again or the
// next rival's price.
func TestMinBidMovesWithDemand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 33, Balance: 1e6, Offers: 400})
	const q = `{"rentable":{"eq":true},"order":[["id","asc"]],"type":"bid","allocated_storage":20,"limit":400}`
	floor := map[int64]float64{}
	h.m.mu.Lock()
	for _, o := range h.m.offers {
		floor[o.ID] = o.MinBid
	}
	h.m.mu.Unlock()
	moved, changed := 0, 0
	var raised []int64
	last := map[int64]float64{}
	for w := range 6 {
		if w > 0 {
			h.clock.Advance(bidWindow)
		}
		for _, o := range h.search(q) {
			if o.MinBid < floor[o.ID] {
				t.Fatalf("offer %d lists min_bid %.4f below its floor %.4f", o.ID, o.MinBid, floor[o.ID])
			}
			if o.MinBid > floor[o.ID] {
				moved++
				if w == 5 {
					raised = append(raised, o.ID)
				}
			}
			if p, ok := last[o.ID]; ok && p != o.MinBid {
				changed++
			}
			last[o.ID] = o.MinBid
		}
	}
	if moved == 0 || changed == 0 || len(raised) == 0 {
		t.Fatalf("min_bid never moved: %d listings above the floor, %d changes between windows, %d raised now", moved, changed, len(raised))
	}
	id := raised[0]
	listed := last[id]
	create := func(price float64) (int, int64, string) {
		var out struct {
			NewContract int64 `json:"new_contract"`
		}
		st, _, body := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", id), map[string]any{"image": "ubuntu:22.04", "disk": 20, "price": price}, &out)
		return st, out.NewContract, string(body)
	}
	if st, _, body := create(floor[id]); st != 400 || !strings.Contains(body, fmt.Sprintf("$%.4f/h", listed)) {
		t.Fatalf("a bid at the floor %.4f under a rival: %d %s, want 400 naming the listed %.4f", floor[id], st, body, listed)
	}
	st, inst, body := create(listed)
	if st != 200 {
		t.Fatalf("a bid at the listed min_bid %.4f: %d %s", listed, st, body)
	}
	if in := h.show(inst); in.MinBid != listed {
		t.Errorf("the instance row lists min_bid %.4f, want %.4f", in.MinBid, listed)
	}
	end := time.Unix((bidWindowOf(h.clock.Now())+1)*int64(bidWindow/time.Second), 0)
	for h.clock.Now().Add(time.Minute).Before(end) {
		h.clock.Advance(time.Minute)
		if in := h.show(inst); in.Status() == provider.StateStopped {
			t.Fatalf("outbid %v into the window that listed its price: %s", h.clock.Now().Sub(end.Add(-bidWindow)), in.StatusMsg)
		}
	}
	t.Logf("%d listings above the floor over 6 windows of 400 offers; %d changes between windows", moved, changed)
}
