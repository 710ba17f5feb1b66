package launch

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
)

func TestReleaseDue(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deadline := t0.Add(10 * time.Minute)
	base := releaseView{park: true, backfill: true, now: t0.Add(5 * time.Minute), deadline: deadline,
		lead: time.Minute, booting: 50, onTime: 40, booted: 200, up: 200, quorum: 345, canRent: true, rentsOK: 250, count: 300}
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
		{"enough expected back", func(v *releaseView) { v.up, v.back, v.backSD = 320, 305, 4 }, true, "enough expected to run again"},
		{"expected back within a deviation of the count", func(v *releaseView) { v.up, v.back, v.backSD = 320, 303, 4 }, false, ""},
		{"the count up, losses replaceable", func(v *releaseView) { v.up, v.replaceable = 300, true }, true, "the count is up, with time to replace what the release loses"},
		{"losses replaceable, short of the count", func(v *releaseView) { v.up, v.replaceable = 299, true }, false, ""},
		{"the count up, the rest late", func(v *releaseView) { v.up, v.onTime = 300, 0 }, true, "the rest are late"},
		{"the count up, some on time", func(v *releaseView) { v.up = 300 }, false, ""},
		{"the rest late, short of the count", func(v *releaseView) { v.up, v.onTime = 299, 0 }, false, ""},
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	cases := []struct {
		park, backfill, released bool
		share, pRelease          float64
		count, want              int
	}{
		{true, true, false, 0.15, 0.5, 300, 45}, // a fixed share wins
		{true, true, false, 0.15, 0.5, 7, 2},
		{false, true, false, 0.15, 0.5, 300, 0},
		{true, false, false, 0.15, 0.5, 300, 0},
		{true, true, true, 0.15, 0.5, 300, 0},
		{true, true, false, -1, 0.5, 300, 0},
		{true, true, false, 0, 0.8, 300, 75},                                  // 375 × 0.8 = 300
		{true, true, false, 0, releaseShare(priorTakenPerMinute, 5), 300, 81}, // the published 172 of 218
		{true, true, false, 0, 1, 300, 0},                                     // nothing lost: no spare
		{true, true, false, 0, 0, 10, 90},                                     // a share of 0 is floored at 0.1
		{true, true, false, 0, 0.999, 1, 1},                                   // one instance, nearly sure: still a spare
	}
	for _, c := range cases {
		if got := spareCount(c.park, c.backfill, c.released, c.share, c.pRelease, c.count); got != c.want {
			t.Errorf("spareCount(%v, %v, %v, %v, %v, %d) = %d, want %d", c.park, c.backfill, c.released, c.share, c.pRelease, c.count, got, c.want)
		}
	}
}

func TestObservedShare(t *testing.T) {
	t.Parallel()
	if got := observedShare(0.7, 0, 0); got != 0.7 {
		t.Errorf("no observation: %v, want the prior 0.7", got)
	}
	if got := observedShare(0.7, 20, 20); math.Abs(got-0.85) > 1e-12 {
		t.Errorf("20 of 20 against a prior weighing 20: %v, want 0.85", got)
	}
	if got := observedShare(0.7, 0, 1000); got > 0.02 {
		t.Errorf("1000 failures: %v, want near 0", got)
	}
}

func TestLoadingWanted(t *testing.T) {
	t.Parallel()
	cases := []struct {
		want, booted int
		pBoot        float64
		out          int
	}{
		{300, 0, 0.75, 400},
		{300, 0, 1, 300},
		{300, 200, 0.5, 200},
		{300, 300, 0.5, 0},
		{300, 350, 0.5, 0},
		{10, 0, 0, 100}, // floored at 0.1
	}
	for _, c := range cases {
		if got := loadingWanted(c.want, c.booted, c.pBoot); got != c.out {
			t.Errorf("loadingWanted(%d, %d, %v) = %d, want %d", c.want, c.booted, c.pBoot, got, c.out)
		}
	}
}

func TestLateAfterAndBootsInTime(t *testing.T) {
	t.Parallel()
	est, poll := 4*time.Minute, 15*time.Second
	if got := lateAfter(est, 1, 0, poll); got != 6*time.Minute+poll {
		t.Errorf("lateAfter = %v, want 1.5 × the estimate + a poll", got)
	}
	if got := lateAfter(est, 2, 0, poll); got != 12*time.Minute+poll {
		t.Errorf("boots twice as slow as estimated: %v", got)
	}
	if got := lateAfter(est, 1, 3*time.Minute, poll); got != 3*time.Minute {
		t.Errorf("a fixed hedge time: %v", got)
	}
	if got := bootRatio([]float64{2, 2, 2, 2}); got != 1 {
		t.Errorf("four boots: %v, want 1 until five", got)
	}
	if got := bootRatio([]float64{1.3, 0.9, 1.1, 5, 1.2}); got != 1.2 {
		t.Errorf("bootRatio = %v, want the median 1.2", got)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dl := t0.Add(10 * time.Minute)
	if !bootsInTime(t0, dl, 5*time.Minute, time.Minute) || bootsInTime(t0.Add(5*time.Minute), dl, 5*time.Minute, time.Minute) {
		t.Error("bootsInTime: a 5-minute load with a minute's lead fits from 0 and not from 5")
	}
	if !bootsInTime(t0.Add(time.Hour), time.Time{}, time.Hour, time.Hour) {
		t.Error("no deadline: always in time")
	}
}

func TestTakenPerMinuteAndReleaseShare(t *testing.T) {
	t.Parallel()
	if got := releaseShare(takenPerMinute(0, 0), 5); math.Abs(got-172.0/218) > 1e-9 {
		t.Errorf("prior over five minutes: %v, want the published 172/218", got)
	}
	if got := takenPerMinute(0, 900); got > priorTakenPerMinute/5 {
		t.Errorf("900 parked minutes, none lost: %v, want a tenth of the prior", got)
	}
	if got := takenPerMinute(50, 100); got < 0.2 {
		t.Errorf("50 lost over 100 minutes: %v", got)
	}
	if releaseShare(0.05, 0) != 1 || releaseShare(2, 3) != 0 {
		t.Error("releaseShare bounds")
	}
}

func TestParkPays(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dph, perMinute, minutes, value float64
		want                           bool
	}{
		{0.60, 0.046, 4, 0.10, true},  // dear: 4 min save $0.04, risk 17% of $0.10
		{0.10, 0.046, 4, 0.10, false}, // cheap: saves $0.0067, risks $0.017
		{0.10, 0, 4, 0.10, true},      // nothing is ever taken: parking always pays
		{0.60, 0.046, 0, 0.10, false}, // the release is now
		{0.60, 0.046, 4, 10, false},   // a booted instance is precious here
		{0.33, 0.046, 4, 0.107, true}, // the realistic market's typical node
		{0.33, 0.046, 4, 0.15, false}, // the same where boots fail more
	}
	for _, c := range cases {
		if got := parkPays(c.dph, c.perMinute, c.minutes, c.value); got != c.want {
			t.Errorf("parkPays(%v, %v, %v, %v) = %v, want %v", c.dph, c.perMinute, c.minutes, c.value, got, c.want)
		}
	}
}

func TestSurplus(t *testing.T) {
	t.Parallel()
	n := func(id int64, ph phase, rank int) trimNode { return trimNode{id: id, phase: ph, rank: rank} }
	failed := trimNode{id: 9, phase: phBooting, rank: 0, failed: true}
	cases := []struct {
		name             string
		ns               []trimNode
		complete, trimOn bool
		count, target    int
		want             []cut
	}{
		{"complete: loading and failed go, then the worst running beyond count",
			[]trimNode{n(1, phReady, 5), n(2, phReady, 1), n(3, phBooting, 0), n(4, phReady, 3), failed},
			true, true, 2, 3,
			[]cut{{3, "surplus: the fleet is complete"}, {9, "surplus: the fleet is complete"}, {1, "surplus: more running than asked"}}},
		{"complete, exactly count running",
			[]trimNode{n(1, phReady, 5), n(2, phReady, 1)}, true, false, 2, 2, nil},
		{"booted below target: nothing",
			[]trimNode{n(1, phParked, 0), n(2, phBooting, 1), n(3, phBooting, 2)}, false, true, 2, 2, nil},
		{"target booted: loading ones go, the worst booted beyond target too",
			[]trimNode{n(1, phParked, 4), n(2, phBooting, 1), n(3, phParked, 0), n(4, phReady, 2), failed},
			false, true, 2, 2,
			[]cut{{2, "surplus: enough instances booted"}, {1, "surplus: more booted than needed"}}},
		{"ties in rank: the newest goes first",
			[]trimNode{n(1, phParked, 0), n(2, phParked, 0), n(3, phParked, 0)}, false, true, 2, 2,
			[]cut{{3, "surplus: more booted than needed"}}},
		{"no backfill before the release: nothing",
			[]trimNode{n(1, phParked, 0), n(2, phParked, 1), n(3, phBooting, 2)}, false, false, 1, 1, nil},
	}
	for _, c := range cases {
		got := surplus(c.ns, c.complete, c.trimOn, c.count, c.target)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestOutbidSeen(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

func TestExpectedBack(t *testing.T) {
	t.Parallel()
	// Nothing parked: the running ones, for sure.
	if m, sd := expectedBack(7, nil, 0.05); m != 7 || sd != 0 {
		t.Errorf("running only: %v ± %v, want 7 ± 0", m, sd)
	}
	// Just parked: all back. Parked long: fewer, and less sure.
	m0, _ := expectedBack(0, []float64{0, 0}, 0.05)
	m5, sd5 := expectedBack(0, []float64{5, 5}, 0.05)
	want := 2 * math.Pow(0.95, 5)
	if m0 != 2 || math.Abs(m5-want) > 1e-9 || sd5 <= 0 {
		t.Errorf("parked 0 min: %v; parked 5 min: %v ± %v, want 2 and %.4f ± >0", m0, m5, sd5, want)
	}
	// The published launch: 218 parked about five minutes at the prior
	// rate come back as about 172.
	mins := make([]float64, 218)
	for i := range mins {
		mins[i] = 5
	}
	if m, _ := expectedBack(0, mins, priorTakenPerMinute); math.Abs(m-172) > 0.5 {
		t.Errorf("the published launch: %.1f back, want 172", m)
	}
}

func TestReplaceableAfter(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := time.Minute
	cases := []struct {
		name              string
		release, deadline time.Time
		load, late, lead  time.Duration
		want              bool
	}{
		// 4 + 0.5 (Scheduling) + 6 (late once) + 4 (load) + 1 (lead) = 15.5.
		{"a 20-minute deadline, released at 4", t0.Add(4 * m), t0.Add(20 * m), 4 * m, 6 * m, m, true},
		{"just fits", t0.Add(4 * m), t0.Add(15*m + 30*time.Second), 4 * m, 6 * m, m, true},
		{"a second short", t0.Add(4 * m), t0.Add(15*m + 29*time.Second), 4 * m, 6 * m, m, false},
		{"the published 10 minutes", t0.Add(4 * m), t0.Add(10 * m), 4 * m, 6 * m, m, false},
		{"no deadline", t0.Add(4 * m), time.Time{}, 4 * m, 6 * m, m, true},
	}
	for _, c := range cases {
		if got := replaceableAfter(c.release, c.deadline, c.load, c.late, c.lead); got != c.want {
			t.Errorf("%s: replaceableAfter = %v, want %v", c.name, got, c.want)
		}
	}
}
