package launch

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
)

// The planner alone: a model as a listing left it, the plan it makes. No
// marketplace, no store: the model cannot reach either.

var planT0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// testModel is a launch of count with the given nodes, started at
// planT0 with a 10-minute deadline.
func testModel(count int, park, backfill bool, nodes ...*node) *model {
	spec := DefaultSpec("t", count, 10*time.Minute, park).WithDefaults()
	spec.Backfill = backfill
	var cands []market.Ranked
	for i := range 20 {
		cands = append(cands, market.Ranked{Offer: market.Offer{ID: int64(100 + i), MachineID: int64(1000 + i), DPHTotal: 0.5}})
	}
	m := &model{spec: spec, cands: cands, byOff: map[int64]market.Offer{}, rank: map[int64]int{}, ratio: 1,
		nodes: map[int64]*node{}, destroying: map[int64]time.Time{}, goingDPH: map[int64]float64{},
		usedOffers: map[int64]bool{}, machines: map[int64]int{}, bad: map[int64]bool{},
		start: planT0, deadline: planT0.Add(spec.Deadline), since: planT0, lastTick: planT0,
		inflight: map[int64]market.Ranked{}}
	for i, c := range cands {
		m.byOff[c.ID], m.rank[c.ID] = c.Offer, i
	}
	for _, n := range nodes {
		n.offerID, n.machineID, n.offer = n.id+100, n.id+1000, m.byOff[n.id+100]
		n.seen = true
		if n.rentedAt.IsZero() {
			n.rentedAt = planT0
		}
		m.nodes[n.id] = n
		m.machines[n.machineID]++
		m.usedOffers[n.offerID] = true
	}
	return m
}

// steps says a plan in short: kind:instance, and the event a say names.
func steps(plan []Action) string {
	var out []string
	for _, a := range plan {
		switch a.Kind {
		case ActSay:
			out = append(out, "say:"+a.Event.Event)
		case ActRecordRelease:
			out = append(out, string(a.Kind))
		default:
			out = append(out, string(a.Kind)+":"+itoa(a.Instance))
		}
	}
	return strings.Join(out, " ")
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestPlanTransitions(t *testing.T) {
	t.Parallel()
	at := func(d time.Duration) time.Time { return planT0.Add(d) }
	for _, c := range []struct {
		name           string
		park, backfill bool
		n              node
		now            time.Duration
		want           string
		wantPhase      phase
		reason         string // of the last action
	}{
		{name: "boots, not parking", n: node{id: 1, state: provider.StateRunning},
			now: time.Minute, want: "say:ready", wantPhase: phReady},
		{name: "boots and parks", park: true, backfill: false, n: node{id: 1, state: provider.StateRunning},
			now: time.Minute, want: "say:ready park:1", wantPhase: phParking, reason: "booted: parked until the release"},
		{name: "exits, replaced", backfill: true, n: node{id: 2, state: provider.StateExited},
			now: time.Minute, want: "mark-bad:2 say:failed replace:2", wantPhase: phBooting, reason: "container exited"},
		{name: "exits, left to the end without backfill", n: node{id: 2, state: provider.StateExited},
			now: time.Minute, want: "mark-bad:2 say:failed", wantPhase: phBooting, reason: "container exited"},
		{name: "host offline", backfill: true, n: node{id: 3, state: provider.StateOffline, phase: phReady},
			now: time.Minute, want: "mark-bad:3 say:failed replace:3", wantPhase: phReady, reason: "host went offline"},
		{name: "boot timeout", backfill: true, n: node{id: 4, state: provider.StateLoading},
			now: DefaultBootTimeout + time.Second, want: "mark-bad:4 say:failed replace:4", wantPhase: phBooting},
		{name: "still loading", n: node{id: 4, state: provider.StateLoading},
			now: time.Minute, want: "", wantPhase: phBooting},
		{name: "parked", park: true, n: node{id: 5, phase: phParking, state: provider.StateStopped, stopSentAt: at(0)},
			now: time.Minute, want: "say:parked", wantPhase: phParked},
		{name: "the stop did not take", park: true, n: node{id: 5, phase: phParking, state: provider.StateRunning, stopSentAt: at(0)},
			now: time.Minute, want: "park:5", wantPhase: phParking, reason: "the stop did not take"},
		{name: "released, runs again", park: true, n: node{id: 6, phase: phReleasing, state: provider.StateRunning, releasedAt: at(0), startSentAt: at(0), startOK: true},
			now: time.Minute, want: "say:running", wantPhase: phReady},
		{name: "released, its GPUs taken", park: true, backfill: true,
			n:   node{id: 7, phase: phReleasing, state: provider.StateStopped, statusMsg: "Scheduling", releasedAt: at(0), startSentAt: at(0), startOK: true},
			now: time.Minute, want: "mark-bad:7 say:failed replace:7", wantPhase: phReleasing},
		{name: "the start failed", park: true, n: node{id: 8, phase: phReleasing, state: provider.StateStopped, releasedAt: at(0), startSentAt: at(0)},
			now: 10 * time.Second, want: "release:8", wantPhase: phReleasing, reason: "the start failed or did not take"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n := c.n
			m := testModel(3, c.park, c.backfill, &n)
			m.spec.ParkAll = true
			plan := m.transitions(planT0.Add(c.now))
			if got := steps(plan); got != c.want {
				t.Fatalf("plan %q, want %q", got, c.want)
			}
			if n.phase != c.wantPhase {
				t.Errorf("phase %d, want %d", n.phase, c.wantPhase)
			}
			if c.reason != "" && !strings.Contains(plan[len(plan)-1].Reason, c.reason) && !strings.Contains(plan[len(plan)-2].Reason, c.reason) {
				t.Errorf("reason %q, want %q", plan[len(plan)-1].Reason, c.reason)
			}
			if len(m.plan) != 0 {
				t.Errorf("%d actions left untaken", len(m.plan))
			}
		})
	}
}

func TestPlanDecide(t *testing.T) {
	t.Parallel()
	t.Run("complete: the worst beyond the count goes", func(t *testing.T) {
		t.Parallel()
		m := testModel(2, false, true,
			&node{id: 1, phase: phReady, state: provider.StateRunning},
			&node{id: 2, phase: phReady, state: provider.StateRunning},
			&node{id: 3, phase: phReady, state: provider.StateRunning})
		if !m.decide(planT0.Add(time.Minute)) {
			t.Fatal("not done with the fleet complete")
		}
		plan := m.take()
		if got := steps(plan); got != "destroy:3 say:destroyed" {
			t.Fatalf("plan %q", got)
		}
		if plan[0].Reason != "surplus: more running than asked" {
			t.Errorf("reason %q", plan[0].Reason)
		}
	})
	t.Run("parked and the count up: the release wave", func(t *testing.T) {
		t.Parallel()
		m := testModel(2, true, false,
			&node{id: 1, phase: phParked, state: provider.StateStopped, stopSentAt: planT0},
			&node{id: 2, phase: phParked, state: provider.StateStopped, stopSentAt: planT0})
		if m.decide(planT0.Add(time.Minute)) {
			t.Fatal("done before the release")
		}
		plan := m.take()
		if got := steps(plan); got != "record-release say:release release:1 release:2" {
			t.Fatalf("plan %q", got)
		}
		if !m.released || m.nodes[1].phase != phReleasing || !strings.HasPrefix(plan[2].Reason, "release wave: quorum") {
			t.Errorf("released %v, phase %d, reason %q", m.released, m.nodes[1].phase, plan[2].Reason)
		}
	})
	t.Run("past the deadline: what still loads goes", func(t *testing.T) {
		t.Parallel()
		m := testModel(2, false, true,
			&node{id: 1, phase: phReady, state: provider.StateRunning},
			&node{id: 2, phase: phBooting, state: provider.StateLoading})
		done := m.decide(planT0.Add(11 * time.Minute))
		plan := m.take()
		if got := steps(plan); got != "say:deadline destroy:2 say:destroyed" {
			t.Fatalf("plan %q", got)
		}
		if plan[1].Reason != "not running at the end of the launch" || !m.finishing {
			t.Errorf("reason %q, finishing %v", plan[1].Reason, m.finishing)
		}
		if !done {
			t.Error("not done once nothing is left to wait for")
		}
	})
}

func TestPlanRents(t *testing.T) {
	t.Parallel()
	m := testModel(3, false, true, &node{id: 0, state: provider.StateLoading})
	plan := m.rents(2, 2, planT0)
	if got := steps(plan); got != "rent:0 rent:0" {
		t.Fatalf("plan %q", got)
	}
	// Offer 100 (node 0's) is used: the next two in rank order.
	if plan[0].Offer != 101 || plan[1].Offer != 102 || !strings.Contains(plan[0].Reason, "ranked 2 of 20") {
		t.Errorf("offers %d, %d, reason %q", plan[0].Offer, plan[1].Offer, plan[0].Reason)
	}
}
