package launch

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
)

// The launch's decisions are pure functions of an observed snapshot, so
// that each can be table-tested without a marketplace; the runner observes,
// asks them, and acts.

// defaultReleaseLead is how long before the deadline the release wave
// starts when this launch has not yet timed a release: a start after a stop
// takes tens of seconds on vast (vast-api.md), and an instance released at
// the deadline is not running at it.
const defaultReleaseLead = 60 * time.Second

// releaseView is what the release policy looks at.
type releaseView struct {
	park, released, finishing, backfill bool
	now, deadline                       time.Time
	lead                                time.Duration // start the wave this long before the deadline
	booting                             int           // rented, still loading
	booted                              int           // parking, parked, releasing or ready
	up                                  int           // parking, parked or ready (counts toward the quorum)
	quorum                              int           // up needed to release early
	canRent                             bool
	rentsOK, count                      int
}

// releaseDue says whether the parked fleet is to be started now, and why.
func releaseDue(v releaseView) (bool, string) {
	if !v.park || v.released {
		return false, ""
	}
	switch {
	case v.up >= v.quorum:
		return true, "quorum"
	case v.finishing:
		return true, "end of the launch"
	case !v.deadline.IsZero() && v.booted > 0 && !v.now.Before(v.deadline.Add(-v.lead)):
		return true, "deadline near"
	}
	stuck := v.booting == 0 && (!v.canRent || !v.backfill && v.rentsOK >= v.count)
	if stuck && v.booted > 0 {
		return true, "nothing left to boot"
	}
	return false, ""
}

// releaseLead is how long before the deadline to release: the slowest
// tenth of the releases timed in this launch (at least one poll, as the
// listing is what shows them running), or defaultReleaseLead before any;
// never more than a tenth of the deadline or the release timeout.
func releaseLead(timed []time.Duration, deadline, releaseTimeout, poll time.Duration) time.Duration {
	lead := defaultReleaseLead
	if len(timed) >= 5 {
		ds := append([]time.Duration(nil), timed...)
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		lead = max(ds[len(ds)*9/10], poll)
	}
	if deadline > 0 {
		lead = min(lead, deadline/10)
	}
	return min(lead, releaseTimeout)
}

// endView is what the termination policy looks at.
type endView struct {
	finishing                bool
	booting, parking, parked int
	releasing, doomed        int
	canRent, backfill        bool
	rentsOK, count           int
	noDeadline               bool
}

// endVerdict: what termination decides.
type endVerdict int

const (
	keepGoing  endVerdict = iota
	startEnd              // nothing left to do but end: start finishing
	launchDone            // the launch is over
)

// ending says whether the launch is over. Finishing, it waits only for
// released instances; otherwise it ends when nothing is loading or parked
// and nothing more can be rented.
func ending(v endView) endVerdict {
	if v.finishing {
		if v.releasing == 0 && v.parking == 0 && v.parked == 0 {
			return launchDone
		}
		return keepGoing
	}
	if v.booting+v.parking+v.parked+v.releasing != 0 {
		return keepGoing
	}
	if v.canRent && (v.backfill || v.rentsOK < v.count) {
		return keepGoing
	}
	switch {
	case v.doomed == 0:
		return launchDone
	case v.noDeadline:
		// Doomed nodes wait for the end; without a deadline that is now.
		return startEnd
	}
	return keepGoing
}

// spareCount is how many spares a parking launch rents on top of count.
func spareCount(park, backfill, released bool, share float64, count int) int {
	if !park || !backfill || released || share <= 0 {
		return 0
	}
	return int(math.Ceil(share * float64(count)))
}

// outbidSeen says whether a listing row shows an interruptible instance a
// rival outbid. vast stops such an instance without the renter asking
// (vast-api.md §11, §15): actual_status "stopped" while intended_status
// stays "running". A start waiting for its GPUs ("Scheduling" in
// status_msg) looks the same and is not an outbid.
func outbidSeen(isBid bool, state, intended, statusMsg string) bool {
	return isBid && state == provider.StateStopped && intended == provider.StateRunning &&
		!strings.HasPrefix(strings.ToLower(strings.TrimSpace(statusMsg)), "scheduling")
}

// RebidStep is what each change bid adds, as a share of the offer's
// min_bid: from --bid min (min_bid + 5%) four steps reach twice min_bid,
// and the bound (the on-demand price) usually comes first.
const RebidStep = 0.25

// outbidView is what the outbid policy looks at: one outbid instance.
type outbidView struct {
	mode    string  // OutbidReplace or OutbidRebid
	canBid  bool    // the marketplace client can change bids
	bid     float64 // what the instance bids now, $/hr
	minBid  float64 // the offer's min_bid
	ceiling float64 // the offer's on-demand compute price: no bid goes above it
	// sinceRebid is how long ago the last change bid went; negative: none.
	sinceRebid time.Duration
	settle     time.Duration // how long a change bid gets to win the machine back
}

type outbidAction int

const (
	outbidWait    outbidAction = iota // a change bid is still settling
	outbidReplace                     // destroy it and rent the next offer
	outbidRebid                       // raise the bid to the price returned
)

// onOutbid decides what to do with an outbid instance: replace it, or
// with rebid raise its bid by RebidStep × min_bid, never above the
// on-demand price (an interruptible at the on-demand price pays for
// priority it does not get: renting elsewhere is better), and replace it
// once the bound is reached and the machine still is not won back.
func onOutbid(v outbidView) (outbidAction, float64) {
	if v.mode != OutbidRebid || !v.canBid {
		return outbidReplace, 0
	}
	if v.sinceRebid >= 0 && v.sinceRebid < v.settle {
		return outbidWait, 0
	}
	step := RebidStep * v.minBid
	if step <= 0 {
		step = RebidStep * v.bid
	}
	next := math.Min(math.Round((v.bid+step)*1e4)/1e4, v.ceiling)
	if next <= v.bid+1e-9 {
		return outbidReplace, 0
	}
	return outbidRebid, next
}
