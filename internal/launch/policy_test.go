package launch

import (
	"math"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
)

func TestReleaseDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deadline := t0.Add(10 * time.Minute)
	base := releaseView{park: true, backfill: true, now: t0.Add(5 * time.Minute), deadline: deadline,
		lead: time.Minute, booting: 50, booted: 200, up: 200, quorum: 345, canRent: true, rentsOK: 250, count: 300}
	cases := []struct {
		name string
		edit func(*releaseView)
		due  bool
		why  string
	}{
		{"mid-launch, short of the quorum", func(*releaseView) {}, false, ""},
		{"no parking", func(v *releaseView) { v.park = false; v.up = 400 }, false, ""},
		{"released already", func(v *releaseView) { v.released = true; v.up = 400 }, false, ""},
		{"quorum", func(v *releaseView) { v.up = 345 }, true, "quorum"},
		{"finishing", func(v *releaseView) { v.finishing = true }, true, "end of the launch"},
		{"just before the lead", func(v *releaseView) { v.now = deadline.Add(-61 * time.Second) }, false, ""},
		{"at the lead", func(v *releaseView) { v.now = deadline.Add(-time.Minute) }, true, "deadline near"},
		{"at the lead, nothing booted", func(v *releaseView) { v.now = deadline.Add(-time.Minute); v.booted, v.up = 0, 0 }, false, ""},
		{"no deadline", func(v *releaseView) { v.deadline = time.Time{}; v.now = deadline.Add(time.Hour) }, false, ""},
		{"nothing loading, nothing to rent", func(v *releaseView) { v.booting = 0; v.canRent = false }, true, "nothing left to boot"},
		{"nothing loading, still renting", func(v *releaseView) { v.booting = 0 }, false, ""},
		{"no backfill, every slot rented", func(v *releaseView) { v.booting = 0; v.backfill = false; v.rentsOK = 300 }, true, "nothing left to boot"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := base
			c.edit(&v)
			due, why := releaseDue(v)
			if due != c.due || why != c.why {
				t.Errorf("releaseDue = %v %q, want %v %q", due, why, c.due, c.why)
			}
		})
	}
}

func TestReleaseLead(t *testing.T) {
	s := time.Second
	cases := []struct {
		name                    string
		timed                   []time.Duration
		deadline, timeout, poll time.Duration
		want                    time.Duration
	}{
		{"nothing timed: the default", nil, 10 * time.Minute, 90 * s, 15 * s, defaultReleaseLead},
		{"too few timed", []time.Duration{5 * s, 5 * s}, 10 * time.Minute, 90 * s, 15 * s, defaultReleaseLead},
		{"slowest tenth", []time.Duration{20 * s, 25 * s, 30 * s, 30 * s, 35 * s, 40 * s, 40 * s, 45 * s, 45 * s, 50 * s}, 10 * time.Minute, 90 * s, 15 * s, 50 * s},
		{"at least one poll", []time.Duration{s, s, s, s, s}, 10 * time.Minute, 90 * s, 15 * s, 15 * s},
		{"a tenth of a short deadline", nil, 2 * time.Minute, 90 * s, 15 * s, 12 * s},
		{"no longer than the release timeout", nil, time.Hour, 30 * s, 15 * s, 30 * s},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := releaseLead(c.timed, c.deadline, c.timeout, c.poll); got != c.want {
				t.Errorf("releaseLead = %v, want %v", got, c.want)
			}
		})
	}
}

func TestEnding(t *testing.T) {
	cases := []struct {
		name string
		v    endView
		want endVerdict
	}{
		{"loading", endView{booting: 3, canRent: true, backfill: true}, keepGoing},
		{"finishing, released still starting", endView{finishing: true, releasing: 2}, keepGoing},
		{"finishing, parked left", endView{finishing: true, parked: 1}, keepGoing},
		{"finishing, all settled", endView{finishing: true, booting: 4}, launchDone},
		{"idle but can rent", endView{canRent: true, backfill: true}, keepGoing},
		{"idle, no backfill, slots left", endView{canRent: true, rentsOK: 3, count: 5}, keepGoing},
		{"idle, no backfill, all rented", endView{canRent: true, rentsOK: 5, count: 5}, launchDone},
		{"idle, nothing to rent", endView{}, launchDone},
		{"doomed wait for the deadline", endView{doomed: 2}, keepGoing},
		{"doomed, no deadline", endView{doomed: 2, noDeadline: true}, startEnd},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ending(c.v); got != c.want {
				t.Errorf("ending = %v, want %v", got, c.want)
			}
		})
	}
}

func TestSpareCount(t *testing.T) {
	cases := []struct {
		park, backfill, released bool
		share                    float64
		count, want              int
	}{
		{true, true, false, 0.15, 300, 45},
		{true, true, false, 0.15, 7, 2},
		{false, true, false, 0.15, 300, 0},
		{true, false, false, 0.15, 300, 0},
		{true, true, true, 0.15, 300, 0},
		{true, true, false, -1, 300, 0},
	}
	for _, c := range cases {
		if got := spareCount(c.park, c.backfill, c.released, c.share, c.count); got != c.want {
			t.Errorf("spareCount(%v, %v, %v, %v, %d) = %d, want %d", c.park, c.backfill, c.released, c.share, c.count, got, c.want)
		}
	}
}

func TestOutbidSeen(t *testing.T) {
	cases := []struct {
		name                       string
		isBid                      bool
		state, intended, statusMsg string
		want                       bool
	}{
		{"stopped by a rival", true, "stopped", "running", "Outbid: a higher bid holds the machine", true},
		{"stopped by a rival, no message", true, "stopped", "running", "", true},
		{"on demand, stopped while meant to run", false, "stopped", "running", "", false},
		{"parked by us", true, "stopped", "stopped", "", false},
		{"waiting for its GPUs after a start", true, "stopped", "running", "Scheduling: waiting for the GPU", false},
		{"running", true, "running", "running", "", false},
		{"loading again after a change bid", true, "loading", "running", "Starting container", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := outbidSeen(c.isBid, c.state, c.intended, c.statusMsg); got != c.want {
				t.Errorf("outbidSeen = %v, want %v", got, c.want)
			}
		})
	}
}

func TestOnOutbid(t *testing.T) {
	s := time.Second
	base := outbidView{mode: OutbidRebid, canBid: true, bid: 0.105, minBid: 0.1, ceiling: 0.2, sinceRebid: -1, settle: 30 * s}
	cases := []struct {
		name  string
		edit  func(*outbidView)
		act   outbidAction
		price float64
	}{
		{"replace mode", func(v *outbidView) { v.mode = OutbidReplace }, outbidReplace, 0},
		{"rebid: first raise, a quarter of min_bid", func(*outbidView) {}, outbidRebid, 0.13},
		{"rebid: the client cannot change bids", func(v *outbidView) { v.canBid = false }, outbidReplace, 0},
		{"rebid: the last change still settling", func(v *outbidView) { v.sinceRebid = 29 * s }, outbidWait, 0},
		{"rebid: settled and still outbid", func(v *outbidView) { v.sinceRebid = 30 * s; v.bid = 0.13 }, outbidRebid, 0.155},
		{"rebid: capped at the on-demand price", func(v *outbidView) { v.bid = 0.19 }, outbidRebid, 0.2},
		{"rebid: at the on-demand price, still outbid", func(v *outbidView) { v.bid = 0.2; v.sinceRebid = time.Minute }, outbidReplace, 0},
		{"rebid: a bid above on-demand is never raised", func(v *outbidView) { v.bid = 0.3 }, outbidReplace, 0},
		{"rebid: on-demand price unknown", func(v *outbidView) { v.ceiling = 0 }, outbidReplace, 0},
		{"rebid: min_bid unknown, a quarter of the bid", func(v *outbidView) { v.minBid = 0; v.bid = 0.1 }, outbidRebid, 0.125},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := base
			c.edit(&v)
			act, p := onOutbid(v)
			if act != c.act || math.Abs(p-c.price) > 1e-9 {
				t.Errorf("onOutbid = %v %v, want %v %v", act, p, c.act, c.price)
			}
		})
	}
}

func TestBidFor(t *testing.T) {
	o := market.Offer{MinBid: 0.2}
	if p, ok := (Bid{}).For(o); !ok || p != 0.21 {
		t.Errorf("--bid min on min_bid 0.2: %v %v, want 0.21 (min_bid + 5%%)", p, ok)
	}
	if p, ok := (Bid{Price: 0.5}).For(o); !ok || p != 0.5 {
		t.Errorf("--bid 0.5: %v %v", p, ok)
	}
	if _, ok := (Bid{Price: 0.19}).For(o); ok {
		t.Error("--bid 0.19 under min_bid 0.2: accepted")
	}
	if _, ok := (Bid{}).For(market.Offer{}); ok {
		t.Error("--bid min on an offer without min_bid: accepted")
	}
	for _, s := range []string{"0", "-1", "x", "NaN", "Inf", ""} {
		if _, err := ParseBid(s); err == nil {
			t.Errorf("ParseBid(%q) accepted", s)
		}
	}
	if b, err := ParseBid("MIN"); err != nil || b.Price != 0 {
		t.Errorf("ParseBid(MIN) = %+v %v", b, err)
	}
	if b, err := ParseBid("0.35"); err != nil || b.Price != 0.35 {
		t.Errorf("ParseBid(0.35) = %+v %v", b, err)
	}
}
