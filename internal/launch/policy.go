package launch

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/stat"
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
	onTime                              int           // of booting, those not yet late (lateAfter)
	replaceable                         bool          // what a release now loses can be replaced in time
	// back is how many of up are expected to run after a release now
	// (parked ones lost at the rate seen so far, over how long each has
	// been parked), and backSD its standard deviation.
	back, backSD   float64
	booted         int // parking, parked, releasing or ready
	up             int // parking, parked or ready (counts toward the quorum)
	quorum         int // up needed to release early
	canRent        bool
	rentsOK, count int
}

// releaseDue says whether the parked fleet is to be started now, and why.
func releaseDue(v releaseView) (bool, string) {
	if !v.park || v.released {
		return false, ""
	}
	if why := releaseReady(v); why != "" {
		return true, why
	}
	return releaseStuck(v)
}

// releaseReady names the reason to release that the fleet's size or the
// time gives, or none.
func releaseReady(v releaseView) string {
	switch {
	case v.up >= v.quorum:
		return "quorum"
	case v.up >= v.count && v.back-v.backSD >= float64(v.count):
		// Parked GPUs go to other renters by the minute: once enough are
		// expected back (one deviation to spare), waiting for the spares
		// loses more than it adds.
		return "enough expected to run again"
	case v.up >= v.count && v.replaceable:
		// Waiting for spares only loses parked GPUs to other renters
		// when what the release loses can still be replaced.
		return "the count is up, with time to replace what the release loses"
	case v.finishing:
		return "end of the launch"
	case !v.deadline.IsZero() && v.booted > 0 && !v.now.Before(v.deadline.Add(-v.lead)):
		return "deadline near"
	}
	return ""
}

// releaseStuck says whether waiting buys nothing more: nothing is left to
// boot, or what still loads is late.
func releaseStuck(v releaseView) (bool, string) {
	stuck := v.booting == 0 && (!v.canRent || !v.backfill && v.rentsOK >= v.count)
	if stuck && v.booted > 0 {
		return true, "nothing left to boot"
	}
	// Enough are up, and what still loads is late: waiting for stragglers
	// only loses parked GPUs to other renters.
	if v.up >= v.count && v.onTime == 0 && v.booting > 0 {
		return true, "the rest are late"
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

// Priors from the published launch (market-facts.md): of 300 offers asked
// at once, 218 booted within about 10 minutes, and 172 of those ran again
// after being parked, about five minutes on average (booted from minute 3
// to 10, released at 10). A launch starts from these and moves toward what
// it observes, each prior weighing as much as priorWeight boots or
// priorParkedMinutes of parking of its own.
const (
	priorBootShare     = 218.0 / 300
	priorWeight        = 20
	priorParkedMinutes = 100
)

// priorTakenPerMinute is the chance a parked instance's GPUs go to another
// renter in a minute: 46 of 218 over five minutes.
var priorTakenPerMinute = 1 - math.Pow(172.0/218, 1.0/5)

// takenPerMinute blends the prior with lost releases over the minutes the
// released instances had been parked.
func takenPerMinute(lost int, parkedMinutes float64) float64 {
	return (priorTakenPerMinute*priorParkedMinutes + float64(lost)) / (priorParkedMinutes + max(parkedMinutes, 0))
}

// releaseShare is the share of parked instances expected to run again
// after being parked for minutes each at perMinute.
func releaseShare(perMinute, minutes float64) float64 {
	return math.Pow(1-min(max(perMinute, 0), 1), max(minutes, 0))
}

// observedShare blends prior with ok successes out of n observations.
func observedShare(prior float64, ok, n int) float64 {
	return (prior*priorWeight + float64(ok)) / (priorWeight + float64(n))
}

// spareCount is how many spares a parking launch boots on top of count to
// cover the release's losses: the spec's fixed share when it gives one
// (share > 0), none when it says so (share < 0), else enough that count
// run again when each parked instance does with probability pRelease.
func spareCount(park, backfill, released bool, share, pRelease float64, count int) int {
	if !park || !backfill || released || share < 0 {
		return 0
	}
	if share > 0 {
		return int(math.Ceil(share * float64(count)))
	}
	return int(math.Ceil(float64(count)/max(pRelease, 0.1)-1e-9)) - count
}

// loadingWanted is how many instances a launch keeps loading so that want
// have booted in all, booted of them already, when each loading one boots
// in time with probability pBoot.
func loadingWanted(want, booted int, pBoot float64) int {
	if booted >= want {
		return 0
	}
	return int(math.Ceil(float64(want-booted)/max(pBoot, 0.1) - 1e-9))
}

// lateAfter is how long a node may load before a spare is rented for it:
// its own estimated load time, scaled by how this launch's boots compare
// with their estimates so far (ratio; 1 before any), with half again as
// margin, plus a poll (a listing is what shows it running). A fixed
// Spec.HedgeAfter overrides it.
func lateAfter(est time.Duration, ratio float64, fixed, poll time.Duration) time.Duration {
	if fixed > 0 {
		return fixed
	}
	return time.Duration(float64(est)*ratio*1.5) + poll
}

// bootRatio is the median of observed boot / estimated load time over
// this launch's boots, 1 until five were seen: the correction the
// estimates need on this market today.
func bootRatio(observed []float64) float64 {
	if len(observed) < 5 {
		return 1
	}
	return max(stat.Median(observed), 0.25)
}

// timeBoot samples the marketplace's boot of n against its offer's
// estimate: it ended between the last listing that saw n loading and the
// first that saw it running. Boots of instances rented before this
// process took over would include the pause: not timed.
func (m *model) timeBoot(n *node, now time.Time) {
	if n.rentedAt.Before(m.since) || n.load <= 0 {
		return
	}
	end, from := n.runSeenAt, n.loadSeenAt
	if end.IsZero() {
		end = now
	}
	if from.Before(n.rentedAt) {
		from = n.rentedAt
	}
	if took, ok := observedSpan(end.Sub(n.rentedAt), end.Sub(from), m.spec.PollEvery); ok {
		m.bootRatios = append(m.bootRatios, float64(took)/float64(n.load))
		m.ratio = bootRatio(m.bootRatios)
	}
}

// timeGates samples how long n, ready at now, took through the readiness
// gates after it first ran.
func (m *model) timeGates(n *node, now time.Time) {
	if n.rentedAt.Before(m.since) || n.runningAt.IsZero() {
		return
	}
	if took, ok := observedSpan(now.Sub(n.runningAt), m.listingGap, m.spec.PollEvery); ok {
		m.gateTimes = append(m.gateTimes, took.Seconds())
		m.gateTime = time.Duration(stat.Median(m.gateTimes) * float64(time.Second))
	}
}

// observedSpan is a span seen ended by a listing gap after the one
// before: it ended within the gap, so its middle is taken. When the gap
// could hide most of the span (this process stalled, the laptop slept)
// it is no measure at all: a thousand boots all seen at the end of one
// stall once made the launch expect hours per boot and stop backfilling.
func observedSpan(seen, gap, poll time.Duration) (time.Duration, bool) {
	if gap > max(3*poll, seen/4) {
		return 0, false
	}
	return seen - min(gap, seen)/2, true
}

// bootsInTime says whether a rental made at now, expected to load within
// load, runs before the deadline with lead to spare (the release lead when
// parking): renting what cannot is paying for a pull that buys nothing.
func bootsInTime(now, deadline time.Time, load, lead time.Duration) bool {
	return deadline.IsZero() || !now.Add(load+lead).After(deadline)
}

// expectedBack is how many of the instances up would run after a release
// now, and its standard deviation: running ones for sure, each parked one
// with the chance its GPUs were not taken over the minutes it has been
// parked (perMinute each).
func expectedBack(running int, parkedMinutes []float64, perMinute float64) (mean, sd float64) {
	mean = float64(running)
	variance := 0.0
	for _, m := range parkedMinutes {
		p := releaseShare(perMinute, m)
		mean += p
		variance += p * (1 - p)
	}
	return mean, math.Sqrt(variance)
}

// replaceableAfter says whether an instance lost at a release at the
// given time can be replaced before the deadline (with lead to spare):
// the loss is seen as Scheduling after SchedulingFor, and its replacement
// may itself be late once before it loads. Always, without a deadline.
func replaceableAfter(release, deadline time.Time, load, late, lead time.Duration) bool {
	return bootsInTime(release.Add(SchedulingFor+late), deadline, load, lead)
}

// parkPays says whether stopping a just-booted instance until the release
// saves more than it risks: what it would bill running for the minutes to
// the release (dph $/hr) against the chance its GPUs are taken meanwhile
// (perMinute) times value, what getting a booted instance costs.
func parkPays(dph, perMinute, minutes, value float64) bool {
	if minutes <= 0 {
		return false
	}
	return dph*minutes/60 > (1-releaseShare(perMinute, minutes))*value
}

// trimNode is a live node as the surplus policy sees it.
type trimNode struct {
	id     int64
	phase  phase
	rank   int  // place of its offer in the ranking; lower is better
	failed bool // failed without backfill, kept until the end
}

// cut is one node the surplus policy drops, and why.
type cut struct {
	id  int64
	why string
}

// surplus picks the live nodes (ns: not already dropping, in id order) a
// launch no longer needs. Complete (count running and nothing parked):
// every node failed or not running, then the worst running beyond count.
// Before the release, with trimBooted (backfill) and target booted: every
// node still loading, then the worst booted beyond target.
func surplus(ns []trimNode, complete, trimBooted bool, count, target int) []cut {
	var out []cut
	var keep []trimNode
	switch {
	case complete:
		for _, n := range ns {
			if n.phase == phReady && !n.failed {
				keep = append(keep, n)
			} else {
				out = append(out, cut{n.id, "surplus: the fleet is complete"})
			}
		}
		return append(out, worst(keep, count, "surplus: more running than asked")...)
	case trimBooted:
		booted := 0
		for _, n := range ns {
			if n.phase != phBooting && !n.failed {
				booted++
			}
		}
		if booted < target {
			return nil
		}
		for _, n := range ns {
			switch {
			case n.failed:
			case n.phase == phBooting:
				out = append(out, cut{n.id, "surplus: enough instances booted"})
			default:
				keep = append(keep, n)
			}
		}
		return append(out, worst(keep, target, "surplus: more booted than needed")...)
	}
	return nil
}

// worst cuts the worst-ranked of ns beyond the best n (ties: the newest).
func worst(ns []trimNode, n int, why string) []cut {
	if len(ns) <= n {
		return nil
	}
	ns = append([]trimNode(nil), ns...)
	sort.SliceStable(ns, func(i, j int) bool {
		if ns[i].rank != ns[j].rank {
			return ns[i].rank > ns[j].rank
		}
		return ns[i].id > ns[j].id
	})
	out := make([]cut, 0, len(ns)-n)
	for _, x := range ns[:len(ns)-n] {
		out = append(out, cut{x.id, why})
	}
	return out
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
