package launch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/launch/launchsim"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

func TestParkAndRelease(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 1, sim.Faults{})
	rec := &recorder{}
	spec := baseSpec("park", 20)
	spec.Park = true
	spec.ParkAll = true // every one parked, cheap or not
	spec.Spare = -1     // exactly 20 rents: no fault needs a spare here,
	// and the deadline leaves time to replace failures as they show, so
	// no margin is rented for them either
	spec.Deadline = 30 * time.Minute
	sum, err := Run(context.Background(), e.M, spec, launchsim.Candidates(e.Mkt, 10), rec.add)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Ready != 20 || sum.Rented != 20 || sum.Failed != 0 {
		t.Errorf("summary %+v, want 20 ready of 20 rented", sum)
	}
	// Every instance was parked (stopped) before the one release wave.
	if rec.count(EvReady) != 20 || rec.count(EvRelease) != 1 || rec.count(EvRunning) != 20 {
		t.Errorf("ready %d, release waves %d, running again %d", rec.count(EvReady), rec.count(EvRelease), rec.count(EvRunning))
	}
	release := rec.find(EvRelease, "")
	for _, st := range e.Mkt.State() {
		if !st.Destroyed && st.Status != provider.StateRunning {
			t.Errorf("instance %d is %s", st.ID, st.Status)
		}
	}
	// Each instance was stopped once: its ledger shows compute before and
	// after a stop, and none of it ran between its stop and the release.
	for _, le := range e.Mkt.Ledger() {
		if le.Kind == "compute" && le.From.Before(release.At) && le.To.After(release.At) {
			t.Errorf("instance %d billed compute across the release wave: %v..%v", le.InstanceID, le.From, le.To)
		}
	}
	if sum.VCPU <= 0 || sum.DPHTotal <= 0 || sum.GPUs < 20 {
		t.Errorf("fleet totals missing: %+v", sum)
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

func TestBackfillAfterBootFailure(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 2, sim.Faults{BootFail: 0.3, StuckLoading: 0.1})
	rec := &recorder{}
	spec := baseSpec("backfill", 20)
	spec.Deadline = 40 * time.Minute
	spec.BootTimeout = 8 * time.Minute
	spec.MaxRentals = 80 // 40% of boots fail here: more than the default bound of 40
	sum, err := Run(context.Background(), e.M, spec, launchsim.Candidates(e.Mkt, 10), rec.add)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Ready != 20 {
		t.Errorf("ready %d of 20", sum.Ready)
	}
	if sum.Failed == 0 || sum.Replaced == 0 || sum.Rented != 20+sum.Replaced {
		t.Errorf("summary %+v: want failures replaced", sum)
	}
	if rec.find(EvFailed, "container exited") == nil || rec.find(EvFailed, "boot timeout") == nil {
		t.Error("want both an exited and a stuck-loading failure")
	}
	// Failed machines are remembered.
	bad, err := e.St.BadHosts(context.Background(), e.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) < sum.Failed {
		t.Errorf("%d bad hosts for %d failures", len(bad), sum.Failed)
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

func TestReleaseTimeoutReplaces(t *testing.T) {
	t.Parallel()
	// Half the parked GPUs are taken per minute: many restarts wait forever.
	e := newTestEnv(t, 3, sim.Faults{TakenWhileStopped: 0.5})
	rec := &recorder{}
	spec := baseSpec("release", 10)
	spec.Park = true
	spec.Deadline = 40 * time.Minute
	spec.ReleaseTimeout = 2 * time.Minute
	sum, err := Run(context.Background(), e.M, spec, launchsim.Candidates(e.Mkt, 10), rec.add)
	if err != nil {
		t.Fatal(err)
	}
	f := rec.find(EvFailed, "after the release")
	if f == nil {
		t.Fatal("no release timeout")
	}
	if sum.Ready != 10 || sum.Replaced == 0 {
		t.Errorf("summary %+v: want 10 ready with replacements", sum)
	}
	// The stalled instance was destroyed, not left scheduling.
	for _, st := range e.Mkt.State() {
		if st.ID == f.InstanceID && !st.Destroyed {
			t.Errorf("instance %d stuck in scheduling was not destroyed", st.ID)
		}
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

func TestMaxDPHRefusedBeforeRenting(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 4, sim.Faults{})
	cands := launchsim.Candidates(e.Mkt, 10)
	spec := baseSpec("capped", 50)
	spec.MaxDPH = 0.5
	_, err := Run(context.Background(), e.M, spec, cands, nil)
	if !errors.Is(err, ErrCaps) || !strings.Contains(err.Error(), "--max-dph $0.500") || !strings.Contains(err.Error(), "lower --count to") {
		t.Fatalf("err = %v", err)
	}
	if n := len(e.Mkt.CreatesPerOffer()); n != 0 {
		t.Errorf("%d offers rented despite the refusal", n)
	}
	if _, err := e.St.GetFleet(context.Background(), "capped"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("fleet row written: %v", err)
	}
}

func TestBudgetJustBelowRefused(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 4, sim.Faults{})
	cands := launchsim.Candidates(e.Mkt, 10)
	spec := baseSpec("budget", 30)
	spec.Deadline = 10 * time.Minute
	// The projection the launch refuses on is that of the offers in the
	// order it rents them.
	ordered, _, _, err := rentOrder(spec.WithDefaults(), cands)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := CheckCaps(spec, ordered, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec.Budget = plan.Projected * 0.99
	_, err = Run(context.Background(), e.M, spec, cands, nil)
	if !errors.Is(err, ErrCaps) || !strings.Contains(err.Error(), "--budget") || !strings.Contains(err.Error(), "raise --budget to at least") {
		t.Fatalf("err = %v", err)
	}
	if n := len(e.Mkt.CreatesPerOffer()); n != 0 {
		t.Errorf("%d offers rented despite the refusal", n)
	}
}

// The projection CheckCaps refuses on is the worst case, so a launch
// reaches the budget only when failed instances spent money before they
// failed; this drives the runner's cap logic directly with such a state.
func TestBudgetStopsAtCap(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 5, sim.Faults{})
	cands := launchsim.Candidates(e.Mkt, 10)
	spec := baseSpec("budgetstop", 5)
	spec.Deadline = time.Hour
	spec = spec.WithDefaults()
	plan, err := CheckCaps(spec, cands, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec.Budget = plan.Projected * 1.01
	rec := &recorder{}
	r := newRunner(opsOf(e.M), spec, cands, rec.add, map[int64]bool{}, newWindow(e.Clock.Now(), spec.Deadline), e.Clock.Now())
	// Half the hour gone, and failures have already spent 95% of the budget:
	// a replacement for the whole fleet no longer fits.
	e.Clock.Advance(30 * time.Minute)
	r.spent = spec.Budget * 0.95
	got := r.pick(5, e.Clock.Now())
	r.flush(context.Background()) // the planner's cap events
	committed := r.spent
	for _, c := range got {
		committed += c.DPHTotal * 0.5
	}
	if len(got) == 5 || committed > spec.Budget {
		t.Fatalf("picked %d offers, committing $%.2f of a $%.2f budget", len(got), committed, spec.Budget)
	}
	if r.capHit != "" || !strings.Contains(r.budgetHeld, "budget cap $") || rec.find(EvCap, "held back by the budget cap") == nil {
		t.Fatalf("capHit %q, budgetHeld %q: want the rent held back, not the launch stopped", r.capHit, r.budgetHeld)
	}
	// Held, not stopped: as the deadline nears, what runs commits less,
	// and a rental fits again.
	e.Clock.Advance(29 * time.Minute)
	if !r.budgetFits(e.Clock.Now()) || len(r.pick(1, e.Clock.Now())) != 1 {
		t.Error("a minute before the deadline, nothing fits the budget that was held back half an hour before")
	}
	// Spending the budget ends the launch: unready instances are dropped.
	r2 := newRunner(opsOf(e.M), spec, cands, rec.add, map[int64]bool{}, newWindow(e.Clock.Now(), spec.Deadline), e.Clock.Now())
	r2.spent = spec.Budget
	r2.nodes[1] = &node{id: 1, phase: phBooting, seen: true}
	r2.decide(e.Clock.Now())
	drop := r2.apply(context.Background(), r2.take(), e.Clock.Now())
	if !r2.finishing || len(drop) != 1 || !strings.Contains(r2.capHit, "reached") {
		t.Fatalf("finishing %v, drop %v, capHit %q", r2.finishing, drop, r2.capHit)
	}
	sum := r2.summary(context.Background())
	if !strings.Contains(sum.StoppedAtCap, "budget cap") {
		t.Errorf("summary does not say it stopped at the cap: %+v", sum)
	}
}

func TestBadHostsSkippedByLaterLaunch(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: statistics over many rentals, not concurrency; the plain run covers it")
	}
	e := newTestEnv(t, 6, sim.Faults{BootFail: 0.4})
	cands := launchsim.Candidates(e.Mkt, 10)
	spec := baseSpec("first", 15)
	spec.Deadline = 30 * time.Minute
	if _, err := Run(context.Background(), e.M, spec, cands, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bad, err := e.St.BadHosts(ctx, e.Clock.Now())
	if err != nil || len(bad) == 0 {
		t.Fatalf("bad hosts %v, %v", bad, err)
	}
	isBad := map[int64]bool{}
	for _, b := range bad {
		isBad[b.MachineID] = true
	}
	// The second launch gets the same ranking, bad machines first.
	spec2 := baseSpec("second", 10)
	spec2.Deadline = 30 * time.Minute
	if _, err := Run(ctx, e.M, spec2, cands, nil); err != nil {
		t.Fatal(err)
	}
	its, err := e.St.FleetIntents(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if isBad[it.MachineID] {
			t.Errorf("second launch rented offer %d on bad machine %d", it.OfferID, it.MachineID)
		}
	}
	// Cleared hosts are usable again.
	if err := e.St.ClearBadHosts(ctx); err != nil {
		t.Fatal(err)
	}
	if bad, _ := e.St.BadHosts(ctx, e.Clock.Now()); len(bad) != 0 {
		t.Errorf("still %d bad hosts", len(bad))
	}
}

func TestOneOfferPerMachine(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 7, sim.Faults{})
	cands := launchsim.Candidates(e.Mkt, 10)
	spec := baseSpec("machines", 40)
	if _, err := Run(context.Background(), e.M, spec, cands, nil); err != nil {
		t.Fatal(err)
	}
	its, _ := e.St.FleetIntents(context.Background(), "machines")
	seen := map[int64]bool{}
	for _, it := range its {
		if seen[it.MachineID] {
			t.Errorf("machine %d rented twice", it.MachineID)
		}
		seen[it.MachineID] = true
	}
}

func TestResumeAfterInterrupt(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 8, sim.Faults{BootFail: 0.1, CreateRace: 0.05, LostCreate: 0.05, Rate5xx: 0.02, Rate429: 0.02})
	spec := baseSpec("resume", 40)
	spec.Park = true
	spec.Deadline = 20 * time.Minute
	interruptAfter(t, e, spec, EvRented, 25)
	checkNoLeaks(t, e.Mkt, e.St)
	before := len(e.Mkt.CreatesPerOffer())
	sum, err := Resume(context.Background(), e.M, "resume", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Ready != 40 {
		t.Errorf("ready %d of 40 after resume (%+v)", sum.Ready, sum)
	}
	if len(e.Mkt.CreatesPerOffer()) <= before {
		t.Error("resume rented nothing")
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

func TestInterruptDestroyAll(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 9, sim.Faults{})
	spec := baseSpec("abort", 10)
	spec.OnInterrupt = InterruptDestroyAll
	interruptAfter(t, e, spec, EvRented, 1)
	if n := len(e.Mkt.Instances()); n != 0 {
		t.Errorf("%d instances left after destroy-all", n)
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

func TestCleanupDestroysNotRunning(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 10, sim.Faults{})
	spec := baseSpec("clean", 10)
	spec.Park = true
	interruptAfter(t, e, spec, EvParked, 3)
	ids, err := Cleanup(context.Background(), e.M, "clean")
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) == 0 {
		t.Fatal("nothing destroyed")
	}
	for _, in := range e.Mkt.Instances() {
		if in.Status() != provider.StateRunning {
			t.Errorf("instance %d left %s", in.ID, in.Status())
		}
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

func TestRunRefusesExistingFleet(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 11, sim.Faults{})
	spec := baseSpec("twice", 2)
	cands := launchsim.Candidates(e.Mkt, 10)
	if _, err := Run(context.Background(), e.M, spec, cands, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), e.M, spec, cands, nil); !errors.Is(err, ErrFleetExists) || !strings.Contains(err.Error(), "--resume twice") {
		t.Fatalf("err = %v", err)
	}
}

func TestQuorumReleasesEarly(t *testing.T) {
	t.Parallel()
	// A third of the hosts boot past 10 minutes; a quorum of 10 of 15
	// releases the parked ones without waiting for them, and instances that
	// boot after the release run straight away.
	e := newTestEnv(t, 12, sim.Faults{SlowBoot: 0.35})
	rec := &recorder{}
	spec := baseSpec("quorum", 15)
	spec.Park = true
	spec.MinReady = 10
	spec.Spare = -1
	spec.HedgeAfter = -1
	spec.Deadline = 4 * time.Hour // slow boots take up to about 2 hours here
	spec.BootTimeout = 3 * time.Hour
	spec.PollEvery = time.Minute
	sum, err := Run(context.Background(), e.M, spec, launchsim.Candidates(e.Mkt, 10), rec.add)
	if err != nil {
		t.Fatal(err)
	}
	rel := rec.find(EvRelease, "")
	if rel == nil || rec.count(EvRelease) != 1 {
		t.Fatal("want one release wave")
	}
	booted := 0
	for _, ev := range rec.evs {
		if ev.Event == EvReady && !ev.At.After(rel.At) {
			booted++
		}
		if ev.Event == EvParked && ev.At.After(rel.At) {
			t.Errorf("instance %d parked after the release", ev.InstanceID)
		}
	}
	if booted < 10 || booted >= 15 {
		t.Errorf("%d booted (and parked) at the release, want the quorum (10..14)", booted)
	}
	if sum.Ready != 15 {
		for _, ev := range rec.evs {
			if ev.Event != EvProgress {
				t.Logf("%s %s %d %s", ev.At.Format("15:04:05"), ev.Event, ev.InstanceID, ev.Msg)
			}
		}
		t.Errorf("ready %d of 15: %+v", sum.Ready, sum)
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

func TestMaxDPHNeverExceeded(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 13, sim.Faults{BootFail: 0.3, StuckLoading: 0.1})
	cands := launchsim.Candidates(e.Mkt, 10)
	spec := baseSpec("dphcap", 12)
	spec.Park = true
	spec.Deadline = 30 * time.Minute
	plan, err := CheckCaps(spec, cands, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec.MaxDPH = plan.DPH * 1.05
	worst := 0.0
	sum, err := Run(context.Background(), e.M, spec, cands, func(ev Event) {
		if ev.Event != EvProgress {
			return
		}
		live := 0.0
		for _, in := range e.Mkt.Instances() {
			live += in.DPHTotal
		}
		worst = max(worst, live)
	})
	if err != nil {
		t.Fatal(err)
	}
	if worst > spec.MaxDPH+1e-9 {
		t.Errorf("fleet reached $%.3f/hr, above the $%.3f/hr cap", worst, spec.MaxDPH)
	}
	if sum.Ready < 10 || sum.Replaced == 0 {
		t.Errorf("summary %+v: want failures replaced under the cap", sum)
	}
	if sum.Ready < spec.Count && !strings.Contains(sum.StoppedAtCap, "max-dph") {
		t.Errorf("short of the count without saying why: %+v", sum)
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

func TestAfterInterruptDestroyUnready(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 14, sim.Faults{SlowBoot: 0.5})
	spec := baseSpec("ask", 10)
	spec.Park = true
	interruptAfter(t, e, spec, EvParked, 2)
	ids, err := AfterInterrupt(context.Background(), e.M, "ask", InterruptDestroyUnready)
	if err != nil || len(ids) == 0 {
		t.Fatalf("destroyed %v, err %v", ids, err)
	}
	for _, in := range e.Mkt.Instances() {
		if st := in.Status(); st != provider.StateStopped && st != provider.StateRunning {
			t.Errorf("unready instance %d (%s) kept", in.ID, st)
		}
	}
	checkNoLeaks(t, e.Mkt, e.St)
	if _, err := AfterInterrupt(context.Background(), e.M, "ask", InterruptDestroyAll); err != nil {
		t.Fatal(err)
	}
	if n := len(e.Mkt.Instances()); n != 0 {
		t.Errorf("%d left after destroy-all", n)
	}
}

// A launch of an announced option (Spec.Accepted) rents nothing outside
// what the user accepted, even while boots fail and hedges are rented,
// and says each rental of another offer, re-costed, before it is sent
// (issue 22: a job announced on an RTX 4090 ran on an H200).
func TestAcceptedOffersOnly(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 5, sim.Faults{BootFail: 0.4})
	cands := launchsim.Candidates(e.Mkt, 10)
	acc := &Accepted{Offer: cands[0].ID, Est: map[int64]float64{}}
	for i, c := range cands[:8] {
		acc.Est[c.ID] = 1 + float64(i)/10
	}
	spec := baseSpec("accepted", 1)
	spec.Deadline = 10 * time.Minute
	spec.Accepted = acc
	rec := &recorder{}
	if _, err := Run(context.Background(), e.M, spec, cands, rec.add); err != nil {
		t.Fatal(err)
	}
	said := map[int64]bool{}
	rented := 0
	for _, ev := range rec.evs {
		switch ev.Event {
		case EvSubstitute:
			said[ev.OfferID] = true
			if !strings.Contains(ev.Msg, fmt.Sprintf("estimated $%.2f against $%.2f announced", acc.Est[ev.OfferID], acc.Est[acc.Offer])) {
				t.Errorf("substitute event without its re-costing: %s", ev.Msg)
			}
		case EvRented:
			rented++
			if _, ok := acc.Est[ev.OfferID]; !ok {
				t.Errorf("offer %d rented, not among the %d accepted", ev.OfferID, len(acc.Est))
			}
			if ev.OfferID != acc.Offer && !said[ev.OfferID] {
				t.Errorf("offer %d rented in place of the announced %d without a substitute event before it", ev.OfferID, acc.Offer)
			}
		}
	}
	if rented < 2 {
		t.Errorf("%d rentals: the test wants a hedge or a replacement to check", rented)
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

// Where the marketplace takes bulk creates, a fleet is rented a batch a
// call: one intent per offer, grouped under a few batch labels, each offer
// rented once. The boot probe does not split batches: it learns each
// machine's advertised hardware at enrollment, not from the create body.
func TestBulkCreateRentsInBatches(t *testing.T) {
	t.Parallel()
	for _, probe := range []bool{false, true} {
		e := newTestEnv(t, 12, sim.Faults{})
		spec := baseSpec("bulk", 40)
		if probe {
			spec.Hardware = &HardwarePolicy{}
		}
		sum, err := Run(context.Background(), e.M, spec, launchsim.Candidates(e.Mkt, 10), nil)
		if err != nil {
			t.Fatal(err)
		}
		its, err := e.St.FleetIntents(context.Background(), "bulk")
		if err != nil {
			t.Fatal(err)
		}
		batches := map[string][]int64{}
		single := 0
		for _, it := range its {
			if it.BatchLabel == "" {
				single++
				continue
			}
			batches[it.BatchLabel] = append(batches[it.BatchLabel], it.MachineID)
		}
		for label, ms := range batches {
			if len(ms) < 2 || len(ms) > 64 {
				t.Errorf("batch %s holds %d offers", label, len(ms))
			}
		}
		t.Logf("probe %v: %d ready; %d intents: %d batches, %d single creates", probe, sum.Ready, len(its), len(batches), single)
		if sum.Ready != 40 {
			t.Errorf("probe %v: %d ready of 40", probe, sum.Ready)
		}
		if len(batches) == 0 || single > len(its)/4 {
			t.Errorf("probe %v: every offer shares a body, yet %d batches and %d single creates of %d", probe, len(batches), single, len(its))
		}
		checkNoLeaks(t, e.Mkt, e.St)
	}
}

// A market too thin to boot the count by the deadline is named before
// anything is rented, with the depth found.
func TestThinMarketIsNamedAtTheStart(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 13, sim.Faults{})
	spec := baseSpec("thin", 5)
	spec.Deadline = 2 * time.Minute // no 8 GB image loads in 72 s
	rec := &recorder{}
	_, _ = Run(context.Background(), e.M, spec, launchsim.Candidates(e.Mkt, 10), rec.add)
	w := rec.find(EvWarn, "thin market")
	if w == nil {
		t.Fatalf("no thin-market warning: %+v", rec.evs)
	}
	if !strings.Contains(w.Msg, "0 offers are expected to load") || !strings.Contains(w.Msg, "--count 5") {
		t.Errorf("warning %q does not give the depth found", w.Msg)
	}
	if rec.evs[0].Event != EvStart || rec.evs[1].Event != EvWarn {
		t.Errorf("the warning is not given at the start")
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

// TestStallDoesNotStopBackfill: this process stalls for four market
// hours right after its rentals went out, before any booted (a laptop asleep, a machine starved of
// CPU) while the market goes on. The boots it then sees all at once did
// not take four hours: they are not timed, so the launch still expects
// a replacement to boot in minutes and replaces the machines that never
// loaded. Before, a thousand-node launch that stalled this way timed
// every boot at the stall's length and rented no replacement.
func TestStallDoesNotStopBackfill(t *testing.T) {
	t.Parallel()
	var stalled sync.Once
	var e *launchsim.Env
	wrap := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if strings.HasPrefix(req.URL.Path, "/api/v1/instances") && e.Clock.Now().Sub(launchsim.Start) > 20*time.Second {
				stalled.Do(func() { e.Clock.Advance(4 * time.Hour) })
			}
			next.ServeHTTP(w, req)
		})
	}
	var err error
	e, err = launchsim.NewWrapped(context.Background(), 5, 3000, sim.Faults{StuckLoading: 0.3}, t.TempDir(), wrap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	rec := &recorder{}
	spec := baseSpec("stall", 20)
	spec.Deadline = 6 * time.Hour
	spec.ImageGB = 8 // each boot is estimated from the pull and unpack
	// No hedges: what replaces the stuck machines is the backfill after
	// their boot timeout, which renting only what can boot in time gates.
	spec.HedgeAfter = -1
	sum, err := Run(context.Background(), e.M, spec, launchsim.Candidates(e.Mkt, 10), rec.add)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Ready != 20 || sum.Replaced == 0 {
		t.Errorf("after the stall: %d of 20 ready, %d replaced, %d failed; want every stuck machine replaced", sum.Ready, sum.Replaced, sum.Failed)
	}
	t.Logf("%d ready, %d failed, %d replaced; launch ended %v into the market", sum.Ready, sum.Failed, sum.Replaced, e.Clock.Now().Sub(launchsim.Start).Round(time.Minute))
	checkNoLeaks(t, e.Mkt, e.St)
}
