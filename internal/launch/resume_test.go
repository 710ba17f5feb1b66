package launch

import (
	"context"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/launch/launchsim"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

// A launch paused for most of its deadline and then resumed keeps the
// deadline it started with, and still rents: the boots that happened
// during the pause say nothing about how long a new rental takes.
func TestResumeKeepsTheDeadlineAndRentsAgain(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 8, sim.Faults{BootFail: 0.1, CreateRace: 0.05})
	spec := baseSpec("pause", 40)
	spec.Park = true
	spec.Deadline = 20 * time.Minute
	spec.CreateBatch = 1 // one offer a call, so that the interrupt leaves rents to do
	start := e.Clock.Now()
	interruptAfter(t, e, spec, EvRented, 25)
	// The user comes back 12 minutes later; the market did not wait.
	e.Clock.Advance(12 * time.Minute)
	before := len(e.Mkt.CreatesPerOffer())
	rec := &recorder{}
	sum, err := Resume(context.Background(), e.M, "pause", rec.add)
	if err != nil {
		t.Fatal(err)
	}
	deadline := start.Add(spec.Deadline)
	ev := rec.find(EvStart, "left of the deadline")
	if ev == nil {
		t.Fatalf("the resume does not say how much of the deadline is left: %+v", rec.evs)
	}
	if left := deadline.Sub(ev.At); !strings.Contains(ev.Msg, left.Round(time.Second).String()+" left") {
		t.Errorf("resume message %q, want %s left", ev.Msg, left.Round(time.Second))
	}
	if got := len(e.Mkt.CreatesPerOffer()) - before; got == 0 {
		t.Fatalf("the resume rented nothing (%+v)", sum)
	}
	if d := rec.find(EvDeadline, ""); d != nil && d.At.Sub(deadline) > 2*DefaultPollEvery {
		t.Errorf("deadline hit at %s, want the original %s", d.At.Format(time.TimeOnly), deadline.Format(time.TimeOnly))
	}
	spec = spec.WithDefaults()
	if late := sum.EndedAt.Sub(deadline); late > spec.ReleaseTimeout+3*spec.PollEvery {
		t.Errorf("the resumed launch ended %s after the original deadline", late)
	}
	if sum.Elapsed != sum.EndedAt.Sub(start) {
		t.Errorf("elapsed %s, want it counted from the original start (%s)", sum.Elapsed, sum.EndedAt.Sub(start))
	}
	if sum.Ready < 36 {
		t.Errorf("ready %d of 40 after the resume (%+v)", sum.Ready, sum)
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

// A resume after the deadline rents nothing: it releases what is parked,
// destroys what is not running, and reports the fleet as it stands.
func TestResumeAfterTheDeadlineReleasesAndCleansUp(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 3, sim.Faults{StuckLoading: 0.2})
	spec := baseSpec("late", 30)
	spec.Park = true
	spec.Deadline = 10 * time.Minute
	interruptAfter(t, e, spec, EvParked, 10)
	e.Clock.Advance(30 * time.Minute)
	before := len(e.Mkt.CreatesPerOffer())
	rec := &recorder{}
	sum, err := Resume(context.Background(), e.M, "late", rec.add)
	if err != nil {
		t.Fatal(err)
	}
	if rec.find(EvStart, "the deadline passed") == nil {
		t.Errorf("the resume does not say the deadline passed: %+v", rec.evs)
	}
	if got := len(e.Mkt.CreatesPerOffer()); got != before {
		t.Errorf("%d rentals after the deadline", got-before)
	}
	if sum.Ready == 0 || sum.Ready != len(sum.ReadyIDs) || sum.Fleet != "late" {
		t.Errorf("summary %+v", sum)
	}
	live, err := e.St.Instances(context.Background(), store.InstanceFilter{Fleet: "late"})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, in := range live {
		if !in.Live() {
			continue
		}
		if in.State != provider.StateRunning || in.Wanted != store.WantRunning {
			t.Errorf("instance %d left %s (wanted %s) after the late resume", in.ID, in.State, in.Wanted)
		}
		running++
	}
	if running != sum.Ready {
		t.Errorf("%d running, summary says %d ready", running, sum.Ready)
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

// The window is stored with the spec; a row written before it was falls
// back to the fleet's creation time.
func TestStoredWindow(t *testing.T) {
	t.Parallel()
	start := launchsim.Start
	raw, _, err := encodeStored(baseSpec("w", 2), nil, newWindow(start, 10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	st, err := decodeStored(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := st.window(start.Add(time.Hour)); !w.start.Equal(start) || !w.deadline.Equal(start.Add(10*time.Minute)) {
		t.Errorf("window %+v", w)
	}
	old := baseSpec("w", 2)
	old.Deadline = 5 * time.Minute
	st = stored{Version: 1, Spec: old}
	if w := st.window(start); !w.start.Equal(start) || !w.deadline.Equal(start.Add(5*time.Minute)) {
		t.Errorf("window of an old row %+v", w)
	}
	raw, _, _ = encodeStored(baseSpec("w", 2), nil, newWindow(start, 0))
	if st, _ = decodeStored(raw, nil); !st.window(start).deadline.IsZero() || strings.Contains(string(raw), "deadline_at") {
		t.Errorf("no deadline stored as %s", raw)
	}
}

// Issue 22: a resume after the store lost its recent writes (a lost WAL,
// a restored backup) keeps the fleet row but none of the intents and
// instances rented since. The instances still run under this store's
// labels: the resume adopts them by label before it rents anything, says
// so, and never rents a second fleet beside the first.
func TestResumeAfterLostWALAdoptsByLabel(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 4, sim.Faults{})
	ctx := context.Background()
	spec := baseSpec("lostwal", 10)
	backup := filepath.Join(t.TempDir(), "backup.db")
	snap := func(ev Event) {
		if ev.Event != EvStart {
			return
		}
		// The fleet row is written; nothing is rented yet.
		s, err := e.St.Snapshot(ctx, backup)
		if err != nil {
			t.Error(err)
			return
		}
		s.Close()
	}
	if _, err := Run(ctx, e.M, spec, launchsim.Candidates(e.Mkt, 10), snap); err != nil {
		t.Fatal(err)
	}
	liveOurs := func() int {
		n := 0
		for _, in := range e.Mkt.State() {
			if _, ok := fleet.ParseLabel(in.Label); ok && !in.Destroyed {
				n++
			}
		}
		return n
	}
	before := liveOurs()
	if before < spec.Count {
		t.Fatalf("%d live after the first launch, want %d", before, spec.Count)
	}
	// Lose the WAL: the backup replaces the database.
	dbPath := e.St.Path()
	if err := e.St.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(dbPath + suffix)
	}
	raw, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dbPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	e.St = st
	e.M = &fleet.Manager{P: e.M.P, S: st, Clock: e.Clock, PollEvery: e.M.PollEvery}
	if ins, _ := st.Instances(ctx, store.InstanceFilter{Fleet: "lostwal"}); len(ins) != 0 {
		t.Fatalf("the rolled-back store still knows %d instances (the test no longer loses the WAL)", len(ins))
	}
	creates := len(e.Mkt.CreatesPerOffer())
	rec := &recorder{}
	sum, err := Resume(ctx, e.M, "lostwal", rec.add)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(e.Mkt.CreatesPerOffer()) - creates; got != 0 {
		t.Errorf("the resume rented %d more instances beside the %d still running", got, before)
	}
	if n := liveOurs(); n > spec.Count {
		t.Errorf("%d live for a count of %d after the resume", n, spec.Count)
	}
	if sum.Ready != spec.Count {
		t.Errorf("ready %d, want %d (%+v)", sum.Ready, spec.Count, sum)
	}
	if rec.find(EvWarn, "adopted") == nil {
		t.Errorf("the resume does not say it adopted instances the store had lost (%d events)", len(rec.evs))
	}
	checkNoLeaks(t, e.Mkt, e.St)
}
