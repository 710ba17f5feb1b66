package job

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/usage"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// end is why a run is over, the run command's exit code per instance, and
// a partial outcome (nodes lost) as an error.
type end struct {
	why   string
	exits map[int64]int
	lost  error
}

// judge looks at the run's nodes and takes out of it those a policy
// (cull) destroys, and into it those that replace them; running are the
// nodes whose run has not ended.
type judge func(ctx context.Context, snap wire.Snapshot, running map[int64]bool) verdict

// verdict is a judge's: instance ids out of the run, and into it, and
// how many nodes are on their way into it (replacements being rented
// and prepared): a run does not end on its exits while one is.
type verdict struct {
	out, in []int64
	coming  int
}

// watch follows the run until it ends: run exited on every node (or its
// node died), every item done, no node left alive with items left,
// max_duration passed, or ctx ended. judge, when not nil, sees each look
// at the run; the nodes it takes out are no longer waited for.
func watch(ctx context.Context, d *Deps, j *jobfile.Job, id string, nodes []Node, judged judge) end {
	began := d.Clock.Now()
	exits := map[int64]int{}
	want := map[int64]bool{}
	for _, n := range nodes {
		want[n.ID] = true
	}
	tick := time.NewTicker(d.pollEvery())
	defer tick.Stop()
	var starved starvation
	for {
		snap := d.Coord.Snapshot(ctx, id)
		silent := tally(snap, want, exits, began)
		coming := 0
		if judged != nil {
			v := judged(ctx, snap, runningOf(want, exits))
			coming = v.coming
			if v.apply(want) {
				// A culled node silent since the run began is no longer
				// one to wait for.
				silent = tally(snap, want, exits, began)
			}
		}
		now := d.Clock.Now()
		v := runView{nodes: len(want) + coming, ended: len(exits), dead: len(silent.dead), t: snap.Totals, elapsed: now.Sub(began), starvedFor: starved.lasted(now, snap.Totals)}
		if d.LostAfter > 0 && v.elapsed >= d.LostAfter {
			// Agents had as long as the coordinator gives a silent node
			// to report (after a resume, to come back): one never heard
			// from is as lost as a dead one.
			v.lost = len(silent.dead) + len(silent.unheard)
		}
		d.emit(Progress{About: About{id}, At: d.Clock.Now(), Elapsed: v.elapsed, Totals: snap.Totals, Ended: v.ended, Nodes: v.nodes})
		if e, done := decide(j, v); done {
			if e.lost != nil {
				e.why += silent.String()
			}
			e.exits = exits
			return e
		}
		select {
		case <-ctx.Done():
			return end{why: "interrupted", exits: exits}
		case <-tick.C:
		}
	}
}

// pollEvery is how often the run is looked at.
func (d *Deps) pollEvery() time.Duration {
	if d.Poll <= 0 {
		return 250 * time.Millisecond
	}
	return d.Poll
}

// apply takes the nodes a judge took out of the run off those watched,
// adds those that joined it, and says whether the watched set changed.
func (v verdict) apply(want map[int64]bool) bool {
	for _, id := range v.out {
		delete(want, id)
	}
	for _, id := range v.in {
		want[id] = true
	}
	return len(v.out)+len(v.in) > 0
}

// starvation follows how long every item left has been starved (no
// watched node may take it).
type starvation struct{ since time.Time }

// lasted is how long the items left have all been starved, as of now;
// 0 when some are not.
func (s *starvation) lasted(now time.Time, t wire.Totals) time.Duration {
	switch {
	case t.ItemsLeft == 0 || t.ItemsStarved < t.ItemsLeft:
		s.since = time.Time{}
	case s.since.IsZero():
		s.since = now
	default:
		return now.Sub(s.since)
	}
	return 0
}

// runningOf are the watched nodes whose run has not exited.
func runningOf(want map[int64]bool, exits map[int64]int) map[int64]bool {
	running := map[int64]bool{}
	for id := range want {
		if _, ok := exits[id]; !ok {
			running[id] = true
		}
	}
	return running
}

// silentNodes are the watched nodes whose run has not exited and that
// stopped reporting (dead), or were never heard from since the run began
// (unheard), by instance id.
type silentNodes struct{ dead, unheard []int64 }

// String names them for the job's end: which nodes it ended without.
func (s silentNodes) String() string {
	name := func(ids []int64) string {
		slices.Sort(ids)
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = strconv.FormatInt(id, 10)
		}
		return strings.Join(parts, ", ")
	}
	out := ""
	if len(s.dead) > 0 {
		out += "; stopped reporting: instance " + name(s.dead)
	}
	if len(s.unheard) > 0 {
		out += "; never heard from since the run began: instance " + name(s.unheard)
	}
	return out
}

// tally records the run's exit codes of the watched nodes into exits and
// returns the others that stopped reporting, and those never heard from
// since the run began: a node last heard before it (on its first boot,
// then parked until the release) has yet to report.
func tally(snap wire.Snapshot, want map[int64]bool, exits map[int64]int, began time.Time) (s silentNodes) {
	heard := map[int64]bool{}
	for _, n := range snap.Nodes {
		if n.State == "dead" && n.LastSeen.Before(began) {
			continue // unheard, below
		}
		heard[n.InstanceID] = true
		if !want[n.InstanceID] {
			continue
		}
		for _, s := range n.Sessions {
			if s.Name == RunSession && (s.State == "exited" || s.State == "failed") && s.ExitCode != nil {
				exits[n.InstanceID] = *s.ExitCode
			}
		}
		if _, ok := exits[n.InstanceID]; !ok && n.State == "dead" {
			s.dead = append(s.dead, n.InstanceID)
		}
	}
	for id := range want {
		if !heard[id] {
			s.unheard = append(s.unheard, id)
		}
	}
	return s
}

// errNodesLost: the job ends short, its nodes lost.
var errNodesLost = errors.New("nodes lost")

// errItemsStarved: the job ends short, no machine left to settle its items.
var errItemsStarved = errors.New("items cannot be validated on this fleet")

// runView is the run at one moment: the nodes watched, those whose run
// exited, those that stopped reporting, those counted lost (dead or never
// heard from, once agents had time to report), the totals and the time
// run.
type runView struct {
	nodes, ended, dead, lost int
	t                        wire.Totals
	elapsed                  time.Duration
	// starvedFor is how long every item left has had no machine of the
	// fleet that may run it.
	starvedFor time.Duration
}

// starveGrace is how long the job waits with every item left starved
// before it gives up: long enough for a refreshed count or a late
// enrollment to change the picture.
const starveGrace = time.Minute

// decide says whether the run is over.
func decide(j *jobfile.Job, v runView) (end, bool) {
	nodes, ended, dead, t := v.nodes, v.ended, v.dead, v.t
	// A node never heard from since the run began is slow, not gone, for
	// a while: parked and released, or back after a resume, its agent
	// boots again. Silent past the orphan-after time, its own dead-man
	// switch has stopped it, and waiting on it would bill every node
	// that finished until max_duration.
	gone := dead
	if v.elapsed >= cmp.Or(j.OrphanAfter, wire.DefaultOrphanAft) {
		gone = max(dead, v.lost)
	}
	switch {
	case j.Run != "" && ended+gone >= nodes:
		if gone > 0 {
			why := fmt.Sprintf("run exited on %d node(s); %d node(s) stopped reporting", ended, gone)
			return end{why: why, lost: partial(fmt.Errorf("%w: %s", errNodesLost, why))}, true
		}
		return end{why: fmt.Sprintf("run exited on all %d node(s); %d finding(s)", ended, t.Findings)}, true
	case t.ItemsDone > 0 && t.ItemsLeft == 0:
		// Every item has its one result: what runs on is spare (a node
		// whose agent never came back, say), and is destroyed.
		return end{why: fmt.Sprintf("all %d item(s) done; run exited on %d of %d node(s)", t.ItemsDone, ended, nodes)}, true
	case t.ItemsLeft > 0 && nodes > 0 && v.lost >= nodes-ended:
		// No agent left to lease an item: waiting would only bill.
		why := fmt.Sprintf("no node alive: %d of %d node(s) lost with %d item(s) left", v.lost, nodes, t.ItemsLeft)
		return end{why: why, lost: partial(fmt.Errorf("%w: %s", errNodesLost, why))}, true
	case t.ItemsLeft > 0 && v.starvedFor >= starveGrace:
		// Validation needs another machine for each item left, and every
		// machine of the fleet has run it or was caught lying.
		why := fmt.Sprintf("%d item(s) left that no machine of this fleet may run: their results disagreed on every machine that could, "+
			"and validation needs one more (see the hosts in the report; a larger count gives it more machines)", t.ItemsLeft)
		return end{why: why, lost: partial(fmt.Errorf("%w: %s", errItemsStarved, why))}, true
	case j.MaxDuration > 0 && v.elapsed >= j.MaxDuration:
		return end{why: fmt.Sprintf("max_duration %s reached; %d finding(s)", j.MaxDuration, t.Findings)}, true
	}
	return end{}, false
}

// runOutcome is the run's error: the nodes lost, and the nodes whose run
// failed (a node still running at max_duration was stopped, not failed).
func runOutcome(j *jobfile.Job, nodes []Node, e end) error {
	if j.Run == "" {
		return e.lost
	}
	failed := 0
	for _, n := range nodes {
		if code, ok := e.exits[n.ID]; ok && code != 0 {
			failed++
		}
	}
	return errors.Join(e.lost, usage.FanOut("the run command", failed, len(nodes)))
}

// ItemsETA is the market time the items left need at the rate so far
// ("ETA -" before the first is done).
func ItemsETA(done, left int64, elapsed time.Duration) string {
	if done == 0 || elapsed <= 0 {
		return "ETA -"
	}
	return "ETA " + (time.Duration(float64(elapsed) / float64(done) * float64(left))).Round(time.Second).String()
}
