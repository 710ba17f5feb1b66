package launch

import (
	"math"
	"sort"
	"time"
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
