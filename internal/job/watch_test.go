package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// TestDecide: when a run is over, and when it is over short (partial).
func TestDecide(t *testing.T) {
	t.Parallel()
	run := &jobfile.Job{Run: "sh work.sh", MaxDuration: time.Hour}
	items := &jobfile.Job{Sessions: []jobfile.Session{{Name: "w", Command: "work {item}"}}, MaxDuration: time.Hour}
	for _, tc := range []struct {
		name          string
		j             *jobfile.Job
		v             runView
		done, partial bool
	}{
		{"run goes on", run, runView{nodes: 3, ended: 1, elapsed: time.Minute}, false, false},
		{"run exited everywhere", run, runView{nodes: 3, ended: 3, elapsed: time.Minute}, true, false},
		{"run exited, a node lost", run, runView{nodes: 3, ended: 2, dead: 1, elapsed: time.Minute}, true, true},
		// Two of 50 nodes died before the run began and were never heard
		// from since: past the orphan-after time (their own switch has
		// stopped them), the 48 that finished are not billed on until
		// max_duration (seen: 48 idle nodes for over an hour of a 2 h
		// max_duration, $20 for a $1.40 job). Before it, they may be
		// booting again after a release or a resume.
		{"run exited, nodes never heard", run, runView{nodes: 50, ended: 48, lost: 2, elapsed: 30 * time.Minute}, true, true},
		{"run exited, nodes slow to come back", run, runView{nodes: 50, ended: 48, lost: 2, elapsed: 15 * time.Minute}, false, false},
		{"items go on", items, runView{nodes: 3, dead: 1, lost: 1, t: wire.Totals{ItemsDone: 2, ItemsLeft: 8}, elapsed: time.Minute}, false, false},
		{"items all done", items, runView{nodes: 3, dead: 1, lost: 1, t: wire.Totals{ItemsDone: 10}, elapsed: time.Minute}, true, false},
		// Dead in the live view, but not yet given the time to come
		// back (a resumed up's first look): the run goes on.
		{"dead, not yet lost", items, runView{nodes: 3, dead: 3, t: wire.Totals{ItemsLeft: 10}, elapsed: time.Minute}, false, false},
		// 0 of 10 items done and no agent alive: billing on until
		// max_duration would only cost.
		{"no node alive, items left", items, runView{nodes: 10, dead: 10, lost: 10, t: wire.Totals{ItemsLeft: 10}, elapsed: 15 * time.Minute}, true, true},
		{"max_duration", items, runView{nodes: 3, t: wire.Totals{ItemsLeft: 10}, elapsed: time.Hour}, true, false},
		// Validation needs another machine for every item left and the
		// fleet has none: after a grace, the job ends short, not at
		// max_duration.
		{"items starved, in grace", items, runView{nodes: 4, t: wire.Totals{ItemsDone: 4, ItemsLeft: 8, ItemsStarved: 8}, elapsed: 5 * time.Minute, starvedFor: 30 * time.Second}, false, false},
		{"items starved", items, runView{nodes: 4, t: wire.Totals{ItemsDone: 4, ItemsLeft: 8, ItemsStarved: 8}, elapsed: 5 * time.Minute, starvedFor: starveGrace}, true, true},
	} {
		e, done := decide(tc.j, tc.v)
		if done != tc.done || errors.Is(e.lost, ErrPartial) != tc.partial {
			t.Errorf("%s: done %v, lost %v; want done %v, partial %v", tc.name, done, e.lost, tc.done, tc.partial)
		}
	}
}

func TestItemsETA(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		done, left int64
		elapsed    time.Duration
		want       string
	}{
		{0, 40, time.Minute, "ETA -"},
		{10, 30, time.Minute, "ETA 3m0s"},
		{40, 0, time.Minute, "ETA 0s"},
	} {
		if got := ItemsETA(tc.done, tc.left, tc.elapsed); got != tc.want {
			t.Errorf("ItemsETA(%d, %d, %v) = %q, want %q", tc.done, tc.left, tc.elapsed, got, tc.want)
		}
	}
}

// TestRunOutcomeOfAnItemsJobWithEveryNodeLost is the outcome up exits
// with: partial (3), not 0.
func TestRunOutcomeOfAnItemsJobWithEveryNodeLost(t *testing.T) {
	t.Parallel()
	items := &jobfile.Job{Sessions: []jobfile.Session{{Name: "w", Command: "work {item}"}}}
	e, _ := decide(items, runView{nodes: 2, dead: 2, lost: 2, t: wire.Totals{ItemsLeft: 10}, elapsed: 15 * time.Minute})
	if err := runOutcome(items, []Node{{ID: 1}, {ID: 2}}, e); !errors.Is(err, ErrPartial) {
		t.Errorf("outcome %v, want partial", err)
	}
}

// TestWatchEndsWhenNoAgentIsLeft: a job with items left whose agents are
// never heard from ends partial once they count as lost, instead of
// billing until max_duration (45 market minutes with 0 of 10 items done,
// exit 0, before).
func TestWatchEndsWhenNoAgentIsLeft(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := e.rent("silent", 2)
	if err := e.db.AddItems(context.Background(), "silent", []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}); err != nil {
		t.Fatal(err)
	}
	cs, err := coord.New(coord.Config{DB: e.db, Clock: e.clock, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	d := e.deps(nil)
	d.Coord, d.Poll, d.LostAfter = cs, time.Millisecond, 10*time.Minute
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the market's time goes on while the run is watched
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				e.clock.Advance(30 * time.Second)
			}
		}
	}()
	jf := &jobfile.Job{Sessions: []jobfile.Session{{Name: "w", Command: "work {item}"}}, MaxDuration: 6 * time.Hour}
	end := watch(context.Background(), d, jf, "silent", []Node{{ID: ids[0]}, {ID: ids[1]}}, nil)
	if !errors.Is(end.lost, ErrPartial) || !strings.Contains(end.why, "no node alive") {
		t.Errorf("watch ended: %q, %v; want partial, no node alive", end.why, end.lost)
	}
	// The job's end names the nodes it ended without.
	if want := fmt.Sprintf("never heard from since the run began: instance %d, %d", min(ids[0], ids[1]), max(ids[0], ids[1])); !strings.Contains(end.why, want) {
		t.Errorf("watch ended: %q; want it to say %q", end.why, want)
	}
}
