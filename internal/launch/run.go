package launch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// ErrInterrupted: the launch's context was cancelled; the fleet is left as
// Spec.OnInterrupt says, and Resume continues it.
var ErrInterrupted = errors.New("launch interrupted")

// ErrFleetExists: Run was given the name of a fleet that exists already.
var ErrFleetExists = errors.New("fleet exists")

// listRetry is how soon a failed listing is tried again.
const listRetry = 3 * time.Second

// cleanupTimeout bounds the work done after a cancellation.
const cleanupTimeout = 3 * time.Minute

// phase is where a node is in the launch.
type phase int

const (
	phBooting   phase = iota // rented, not running yet
	phParking                // ran; stop sent
	phParked                 // stopped after booting, waiting for the release
	phReleasing              // start sent by the release wave
	phReady                  // running and meant to run
)

// node is one live instance of the launch.
type node struct {
	id, offerID, machineID int64
	offer                  market.Offer
	rentedAt               time.Time
	load                   time.Duration // estimated load time of its offer (plan.LoadTime)
	phase                  phase
	state                  string // last seen actual_status, or stopped once a park is recorded (the store's)
	sshHost                string
	sshPort                int
	seen                   bool // listed at least once since this process tracks it
	unknownSince           time.Time
	stopSentAt             time.Time
	releasedAt             time.Time
	startSentAt            time.Time // last start sent by the release
	startOK                bool      // the marketplace accepted that start
	intended, statusMsg    string    // from the last listing

	doomed   bool // failed, left until the end (no backfill)
	dropping bool // chosen for destruction this tick

	// The readiness gates (hardware.go): when the node was first seen
	// running and usable, whether its SSH handshake completed (else why
	// not), its boot probe and whether it was judged.
	runningAt, usableAt time.Time
	// loadSeenAt is the last listing that saw the node booting and not
	// running, runSeenAt the first after it that saw it running: its boot
	// ended between the two.
	loadSeenAt, runSeenAt time.Time
	usable                bool
	unusable              string
	probe                 *wire.Probe
	agentSeen             bool      // the coordinator has heard from its agent
	dueAt                 time.Time // wall time it first waited for its agent's probe
	judged                bool
	// shakeSlow: a handshake ran out of its time, so later ones run in
	// the background (shakeAside); shaking brings the one under way.
	shakeSlow bool
	shaking   chan error

	// Interruptible nodes: what the node bids ($/hr), whether a rival
	// outbid it (until it runs again), and when the last change bid went.
	bid     float64
	outbid  bool
	rebidAt time.Time
}

func (n *node) booted() bool { return n.phase != phBooting }

// gated: the node runs and waits at the readiness gates (hardware.go), its
// handshake or its probe: it has loaded, so it is never late for hedging.
func (n *node) gated() bool {
	return n.phase == phBooting && !n.runningAt.IsZero() && n.state == provider.StateRunning
}

// parkedFor is how long a released node had been parked, in minutes.
func (n *node) parkedFor() float64 {
	if n.stopSentAt.IsZero() || n.releasedAt.Before(n.stopSentAt) {
		return 0
	}
	return n.releasedAt.Sub(n.stopSentAt).Minutes()
}

// rate is what the node bills per hour in its last seen state.
func (n *node) rate() float64 {
	switch n.state {
	case provider.StateRunning, provider.StateRebooting, provider.StateFrozen:
		return n.offer.DPHTotal
	case provider.StateOffline:
		return 0
	}
	return n.offer.StorageTotalCost
}

// runner carries a launch out: it observes the marketplace, asks the
// planner (model, plan.go) what to do, and applies the plan through its
// FleetOps (apply.go), emitting the events the plan names.
type runner struct {
	model
	f      FleetOps
	store  string // the store's id, as labels carry it
	emit   func(Event)
	create provider.CreateRequest
	// listPages is how many calls the last listing took (watchEvery).
	listPages int

	lim   *rate.Limiter
	calls int // create calls in flight, a bulk create counting once (main goroutine only)
	// bulk rents many offers a call where the marketplace can; bulkLim
	// paces those calls.
	bulk    bool
	bulkLim *rate.Limiter
	wg      sync.WaitGroup
	resMu   sync.Mutex
	results []rentResult
	// shakes are the background handshakes (shakeAside), under
	// shakeCtx; the loop stops them as it returns.
	shakes    sync.WaitGroup
	shakeCtx  context.Context
	shakeStop context.CancelFunc
}

// Run launches spec.Count instances from the ranked candidates (best
// first). It creates the fleet row with the spec and candidates first, so
// that Resume can continue after a crash. events may be nil.
func Run(ctx context.Context, m *fleet.Manager, spec Spec, candidates []market.Ranked, events func(Event)) (Summary, error) {
	f := opsOf(m)
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return Summary{}, err
	}
	now := f.Clock().Now()
	if _, err := f.Fleet(ctx, spec.Fleet); err == nil {
		return Summary{}, fmt.Errorf("%w: %q; use --resume %s to continue it, or another --fleet name", ErrFleetExists, spec.Fleet, spec.Fleet)
	} else if !errors.Is(err, store.ErrNotFound) {
		return Summary{}, err
	}
	bad, err := badHosts(ctx, f, now)
	if err != nil {
		return Summary{}, err
	}
	candidates, slow, bidNote, err := rentOrder(spec, candidates)
	if err != nil {
		return Summary{}, err
	}
	budget := bootBudget(spec)
	caps, err := CheckCaps(spec, candidates, bad)
	if err != nil {
		if bidNote != "" {
			err = fmt.Errorf("%w (%s)", err, bidNote)
		}
		return Summary{}, err
	}
	spec.Budget = caps.Budget // a default budget is kept for --resume
	win, err := createFleet(ctx, f, spec, candidates, caps, now)
	if err != nil {
		return Summary{}, err
	}
	r := newRunner(f, spec, candidates, events, bad, win, now)
	r.emit(Event{Event: EvStart, At: now, Msg: startNote(spec, caps, slow, budget, bidNote)})
	if fast := len(candidates) - slow; fast < spec.Count {
		r.emit(Event{Event: EvWarn, At: now, Msg: fmt.Sprintf(
			"thin market: %d offers are expected to load a %.1f GB image within %s, for --count %d; expect fewer by the deadline: widen the query, give a later --deadline, or use a smaller image",
			fast, spec.ImageGB, budget.Round(time.Second), spec.Count)})
	}
	return r.loop(ctx)
}

// rentOrder is the candidates as the launch rents from them: the accepted
// ones, priced for the spec's disk and bid, those expected to boot in time
// first (slow counts the others).
func rentOrder(spec Spec, candidates []market.Ranked) (ordered []market.Ranked, slow int, bidNote string, err error) {
	candidates = spec.Accepted.keep(candidates)
	candidates = priceAt(candidates, spec.Create.Disk)
	candidates, bidNote, err = atBid(spec, candidates)
	if err != nil {
		return nil, 0, "", err
	}
	ordered, slow = bootableFirst(candidates, spec.ImageGB, bootBudget(spec))
	return ordered, slow, bidNote, nil
}

// createFleet writes the launch's records before anything is rented, so
// that Resume can continue after a crash: the secrets, then the fleet row
// with the spec, the candidates and the window it returns.
func createFleet(ctx context.Context, f FleetOps, spec Spec, candidates []market.Ranked, caps Plan, now time.Time) (window, error) {
	win := newWindow(now, spec.Deadline)
	raw, secret, err := encodeStored(spec, candidates, win)
	if err != nil {
		return win, err
	}
	// The store's id labels every rental. Drawn before the fleet row is
	// written, it survives whatever the fleet row survives (a lost WAL
	// drops a suffix of commits), so a resume can find this fleet's
	// instances by label; drawn at the first rent, it could be lost with
	// the rentals and the instances would read as another store's.
	if _, err := f.StoreID(ctx); err != nil {
		return win, fmt.Errorf("launch %s: %w", spec.Fleet, err)
	}
	// The secrets go first: a fleet row whose secrets are missing cannot
	// be resumed. The data dir's lock and the check above keep another
	// launch of this name from racing the write.
	if secret != nil {
		if err := f.SaveSecret(ctx, secretName(spec.Fleet), secret); err != nil {
			return win, fmt.Errorf("launch %s: %w", spec.Fleet, err)
		}
	}
	if err := f.CreateFleet(ctx, store.Fleet{Name: spec.Fleet, CreatedAt: now, Spec: raw, State: store.FleetActive,
		EstDPH: caps.DPH, EstHours: caps.Horizon.Hours(), EstCost: caps.Projected}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return win, fmt.Errorf("%w: %q", ErrFleetExists, spec.Fleet)
		}
		return win, err
	}
	return win, nil
}

// startNote is the start line of a launch: what it rents first, its
// budget and bound, and how it bids.
func startNote(spec Spec, caps Plan, slow int, budget time.Duration, bidNote string) string {
	msg := fmt.Sprintf("launching %d instances (fleet %s): first %d offers at $%.3f/hr plus $%.2f of image pulls; %s; at most %d rentals",
		spec.Count, spec.Fleet, len(caps.Picked), caps.DPH, caps.Bandwidth, budgetNote(spec, caps), spec.MaxRentals)
	if slow > 0 {
		msg += fmt.Sprintf("; %d offers not expected to load a %.1f GB image within %s ranked last", slow, spec.ImageGB, budget.Round(time.Second))
	}
	if spec.Bid != nil {
		msg += "; " + bidName(*spec.Bid) + strings.TrimSuffix("; "+bidNote, "; ")
	}
	return msg
}

// loadStored reads a fleet's row and the launch stored with it (its
// secrets from the store's secret file), for what continues a launch.
func loadStored(ctx context.Context, f FleetOps, fleetName, verb string) (store.Fleet, stored, error) {
	row, err := f.Fleet(ctx, fleetName)
	if err != nil {
		return store.Fleet{}, stored{}, err
	}
	st, err := decodeStored(row.Spec, func() ([]byte, error) {
		return f.LoadSecret(ctx, secretName(fleetName))
	})
	if err != nil {
		return store.Fleet{}, stored{}, fmt.Errorf("%s %s: %w", verb, fleetName, err)
	}
	return row, st, nil
}

// Resume continues a launch from its fleet row: it reconciles the store
// with the marketplace first, tracks the fleet's live instances, never
// rents an offer that has an intent in this fleet, and runs the launch to
// its end within its original deadline. A resume after the deadline rents
// nothing: it releases what is parked, destroys what is not running and
// reports.
//
// checks, when given, are the launch's Checks (never stored with the
// fleet, so a resume is given them again).
func Resume(ctx context.Context, m *fleet.Manager, fleetName string, events func(Event), checks ...Checks) (Summary, error) {
	f := opsOf(m)
	row, st, err := loadStored(ctx, f, fleetName, "resume")
	if err != nil {
		return Summary{}, err
	}
	spec, cands := st.Spec.WithDefaults(), st.Candidates
	if len(checks) > 0 {
		spec.Checks = checks[0]
	}
	adopted, err := adoptLost(ctx, f, fleetName)
	if err != nil {
		return Summary{}, fmt.Errorf("resume %s: %w", fleetName, err)
	}
	now := f.Clock().Now()
	bad, err := badHosts(ctx, f, now)
	if err != nil {
		return Summary{}, err
	}
	r := newRunner(f, spec, cands, events, bad, st.window(row.CreatedAt), now)
	if err := r.takeOver(ctx, adopted); err != nil {
		return Summary{}, err
	}
	r.emit(Event{Event: EvStart, At: now, Msg: r.resumeNote(now)})
	if len(adopted) > 0 {
		r.emit(Event{Event: EvWarn, At: now, Msg: fmt.Sprintf("adopted %d running instances of fleet %s that the store had lost (its recent writes are gone: a lost WAL or a restored backup); found by their labels, counted in the fleet, not rented again: %v",
			len(adopted), fleetName, adopted)})
	}
	return r.loop(ctx)
}

// adoptLost reconciles the store with the marketplace, adopting by label
// before anything is rented: a store that lost its recent writes (a lost
// WAL, a restored backup) still has the fleet row but not the instances
// rented since, which run on under this store's labels. Without them the
// resume would rent a second fleet beside the first. It returns the
// instances adopted that had no intent left.
func adoptLost(ctx context.Context, f FleetOps, fleetName string) ([]int64, error) {
	storeID, err := f.StoreID(ctx)
	if err != nil {
		return nil, err
	}
	rep, err := f.Reconcile(ctx, fleet.ReconcileOptions{Adopt: fleet.OwnFleet(storeID, fleetName)})
	if err != nil {
		return nil, err
	}
	var adopted []int64
	for _, c := range rep.Changes {
		if c.Kind == fleet.ChangeAdopted && c.Intent == 0 {
			adopted = append(adopted, c.Instance)
		}
	}
	return adopted, nil
}

// takeOver loads what the fleet's records say into a resumed runner: the
// offers already tried, the rentals made (adopted ones too), whether the
// release began, the live instances and the spend so far.
func (r *runner) takeOver(ctx context.Context, adopted []int64) error {
	fleetName := r.spec.Fleet
	intents, err := r.f.FleetIntents(ctx, fleetName)
	if err != nil {
		return err
	}
	for _, it := range intents {
		r.usedOffers[it.OfferID] = true
		if it.State == store.IntentCreated {
			r.rentsOK++
		}
	}
	r.rentsOK += len(adopted) // rentals all the same: --max-rentals counts them
	if v, err := r.f.Meta(ctx, releasedKey(fleetName)); err == nil && v != "" {
		r.released = true
	}
	ins, err := r.f.FleetInstances(ctx, fleetName)
	if err != nil {
		return err
	}
	for _, in := range ins {
		if in.Wanted == store.WantDestroy {
			r.destroying[in.ID] = time.Time{}
			continue
		}
		r.track(in)
	}
	if c, err := r.f.Cost(ctx, fleetName); err == nil {
		r.spent = c.Compute + c.Storage
		for _, ic := range c.Instances {
			if _, tracked := r.pulls[ic.InstanceID]; !tracked {
				r.bwBefore += ic.Bandwidth
			}
		}
	}
	return nil
}

// resumeNote is the start line of a resume.
func (r *runner) resumeNote(now time.Time) string {
	msg := fmt.Sprintf("resuming fleet %s: %d live instances, %d rented so far", r.spec.Fleet, len(r.nodes), r.rentsOK)
	switch {
	case r.deadline.IsZero():
	case now.Before(r.deadline):
		msg += fmt.Sprintf("; %s left of the deadline", r.deadline.Sub(now).Round(time.Second))
	default:
		msg += fmt.Sprintf("; the deadline passed %s ago: releasing what is parked, destroying what is not running", now.Sub(r.deadline).Round(time.Second))
	}
	return msg
}

func releasedKey(fleetName string) string { return "launch.released." + fleetName }

// budgetNote says what budget the launch runs under and where it came from.
func budgetNote(s Spec, p Plan) string {
	switch {
	case p.Budget == 0:
		return "no budget cap"
	case s.BudgetAuto:
		return fmt.Sprintf("budget $%.2f (default: %d × median $/hr × %s + the pulls of every allowed rental, ×%.1f; set --budget, or --budget 0 for none)",
			p.Budget, s.Count, p.Horizon, BudgetHeadroom)
	}
	return fmt.Sprintf("budget $%.2f", p.Budget)
}

func badHosts(ctx context.Context, f FleetOps, now time.Time) (map[int64]bool, error) {
	hs, err := f.BadHosts(ctx, now)
	if err != nil {
		return nil, err
	}
	bad := make(map[int64]bool, len(hs))
	for _, h := range hs {
		bad[h.MachineID] = true
	}
	return bad, nil
}

func newRunner(f FleetOps, spec Spec, cands []market.Ranked, events func(Event), bad map[int64]bool, win window, now time.Time) *runner {
	if events == nil {
		events = func(Event) {}
	}
	var mu sync.Mutex
	emit := func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		events(e)
	}
	create := spec.Create
	create.Onstart = Onstart(create.Onstart, spec.Sessions)
	byOff := make(map[int64]market.Offer, len(cands))
	rank := make(map[int64]int, len(cands))
	for i, c := range cands {
		byOff[c.ID] = c.Offer
		rank[c.ID] = i
	}
	r := &runner{
		model: model{
			spec: spec, cands: cands, byOff: byOff, rank: rank, ratio: 1,
			nodes: map[int64]*node{}, destroying: map[int64]time.Time{}, goingDPH: map[int64]float64{}, usedOffers: map[int64]bool{},
			pulls:    map[int64]*store.Instance{},
			machines: map[int64]int{}, bad: bad, start: win.start, deadline: win.deadline, since: now, lastTick: now,
			inflight: map[int64]market.Ranked{},
		},
		f: f, emit: emit, create: create,
		lim:     rate.NewLimiter(rate.Limit(spec.RentRate), max(1, int(spec.RentRate))),
		bulkLim: rate.NewLimiter(bulkCallRate, 1),
	}
	r.bulk, r.canBid = f.CanRentMany(), f.CanChangeBid()
	return r
}

// track adds a store instance as a node, its phase from its state and what
// vastfleet wants of it.
func (r *runner) track(in store.Instance) *node {
	o, ok := r.byOff[in.OfferID]
	if !ok {
		o = market.Offer{ID: in.OfferID, MachineID: in.MachineID, NumGPUs: in.NumGPUs, GPUName: in.GPUName,
			CPUCores: int(in.CPUCores), CPUCoresEffective: in.CPUCores, CPURAM: in.RAMMB,
			DPHTotal: in.DPHTotal, StorageTotalCost: in.StorageDPH}
	}
	n := &node{id: in.ID, offerID: in.OfferID, machineID: in.MachineID, offer: o, rentedAt: in.CreatedAt,
		state: in.State, sshHost: in.SSHHost, sshPort: in.SSHPort, load: plan.LoadTime(r.spec.ImageGB, &o)}
	if r.spec.Bid != nil && in.DPHTotal > in.StorageDPH {
		// The store holds the bid last set (rent, then change bid).
		n.bid, n.offer.DPHTotal = in.DPHTotal-in.StorageDPH, in.DPHTotal
	}
	var released bool
	if n.phase, released = r.trackedPhase(in); released {
		n.releasedAt = r.now() // the release wave starts it (again)
	}
	r.nodes[n.id] = n
	r.machines[n.machineID]++
	r.usedOffers[n.offerID] = true
	if _, ok := r.pulls[in.ID]; !ok {
		r.pulls[in.ID] = r.pullRecord(in, o)
	}
	return n
}

// trackedPhase is where a recorded instance is in the launch, from its
// state and what vastfleet wants of it; released: the release wave has
// begun and it is to be started.
func (m *model) trackedPhase(in store.Instance) (ph phase, released bool) {
	parked := in.Wanted == store.WantParked
	switch {
	case parked && in.State == provider.StateStopped:
		return phParked, m.released
	case parked:
		return phParking, false
	case in.State == provider.StateRunning && (m.released || !m.spec.Park):
		return phReady, false
	case in.State == provider.StateStopped && m.released:
		return phReleasing, true
	}
	return phBooting, false
}

// pullRecord is the bandwidth record of a tracked instance: what it
// pulled as recorded, else the image at its offer's prices (estimated).
func (m *model) pullRecord(in store.Instance, o market.Offer) *store.Instance {
	p := store.Instance{ID: in.ID, State: in.State, Bandwidth: in.Bandwidth}
	if p.Bandwidth.PullGB == 0 {
		p.Bandwidth.PullGB = m.spec.ImageGB
	}
	if p.Bandwidth.DownCost == 0 && p.Bandwidth.UpCost == 0 {
		p.Bandwidth.DownCost, p.Bandwidth.UpCost, p.Bandwidth.DownMbps = o.InetDownCost, o.InetUpCost, o.InetDown
	}
	return &p
}

// bandwidth is what this run's rentals have cost in bandwidth so far
// (reported, or estimated until a listing reports it), and what the
// booting ones are still expected to pull.
func (m *model) bandwidth(now time.Time) (spent, pending float64) {
	spent = m.bwBefore
	for id, p := range m.pulls {
		got, _ := fleet.BandwidthOf(*p, now)
		spent += got
		if n, live := m.nodes[id]; live && n.phase == phBooting && !n.dropping {
			est := market.TransferCost(p.Bandwidth.PullGB, 0, p.Bandwidth.DownCost, p.Bandwidth.UpCost)
			pending += max(est-got, 0)
		}
	}
	return spent, pending
}

// projected is what the launch will have spent once what it runs now is
// stopped: spent so far, the pulls still under way, and the live rate
// for the two polls it takes to see and destroy.
func (m *model) projected(now time.Time) (total, bandwidth float64) {
	bw, pending := m.bandwidth(now)
	rate := 0.0
	for _, n := range m.nodes {
		rate += n.rate()
	}
	return m.spent + bw + pending + rate*(2*m.spec.PollEvery).Hours(), bw + pending
}

func (r *runner) now() time.Time { return r.f.Clock().Now() }

// actorClock is implemented by virtual clocks (clock.Virtual) that
// move only when every goroutine of the launch is asleep; the launch tells
// them how many it runs.
type actorClock interface{ Busy(delta int) }

func (r *runner) busy(d int) {
	if a, ok := r.f.Clock().(actorClock); ok {
		a.Busy(d)
	}
}

// holdClock is implemented by virtual clocks that stand still while a
// request is in flight.
type holdClock interface{ InFlight(delta int) }

// hold keeps a virtual market still while the launch waits on the world
// outside it (agents reporting in wall time); 0 says it still waits.
func (r *runner) hold(d int) {
	if h, ok := r.f.Clock().(holdClock); ok {
		h.InFlight(d)
	}
}

func (r *runner) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return r.f.Clock().Sleep(ctx, d)
}

// watching: an instance is on its way into running, a change the store
// can only date by the listings around it.
func (m *model) watching() bool {
	for _, n := range m.nodes {
		if n.doomed || n.dropping {
			continue
		}
		if n.phase == phReleasing || n.phase == phBooting && n.state != provider.StateRunning {
			return true
		}
	}
	return false
}

// watchShare is the most of a paced client's calls the watch takes: the
// rest is for rents, starts and stops. On vast.ai, 25 instances a page at
// 4 calls a second, a 400-instance fleet's listing is 16 calls: watched
// every 2 s it would take all of them.
const watchShare = 0.25

// watchEvery is the spacing of the watch's listings: Spec.WatchEvery, or
// longer where each listing would take more than watchShare of a paced
// client's calls (pages the last listing took).
func (r *runner) watchEvery() time.Duration {
	every := r.spec.WatchEvery
	pace := r.f.ListRate()
	if pace <= 0 || r.listPages <= 0 {
		return every
	}
	cost := time.Duration(float64(r.listPages) / (float64(pace) * watchShare) * float64(time.Second))
	return max(every, cost)
}

// watch lists the fleet between two ticks and records what the listing
// shows (observe), acting on nothing but destroys to send again: the
// next tick decides. A listing that fails is left to the tick.
func (r *runner) watch(ctx context.Context) {
	l, err := r.f.ListInstances(ctx)
	if err != nil {
		return
	}
	r.listPages = l.Pages
	r.land(ctx)
	r.destroy(ctx, r.observe(ctx, l, r.now()))
}

// tick observes one complete listing, plans the node transitions and
// applies them, then plans the fleet's decisions (release, surplus, end)
// and applies those; what both destroy goes in one call. It reports
// whether the launch is over.
func (r *runner) tick(ctx context.Context, l provider.Listing, now time.Time) bool {
	toDestroy := r.observe(ctx, l, now)
	r.gateChecks(ctx)
	toDestroy = append(toDestroy, r.apply(ctx, r.transitions(now), now)...)
	done := r.decide(now)
	toDestroy = append(toDestroy, r.apply(ctx, r.take(), now)...)
	r.destroy(ctx, toDestroy)
	return done
}

// flush applies what the planner said outside a tick (the caps and
// substitutions a rent meets): events only.
func (r *runner) flush(ctx context.Context) {
	if len(r.plan) > 0 {
		r.apply(ctx, r.take(), r.now())
	}
}

// loop is the one goroutine that drives the launch: one batched listing per
// tick, then the transitions it implies, then rents.
func (r *runner) loop(ctx context.Context) (Summary, error) {
	r.busy(1)
	defer r.busy(-1)
	defer r.endShakes()
	for {
		if ctx.Err() != nil {
			return r.interrupted(ctx)
		}
		tickStart := r.now()
		next := tickStart.Add(r.spec.PollEvery)
		l, err := r.f.ListInstances(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return r.interrupted(ctx)
		case errors.Is(err, provider.ErrAuth):
			r.settle(ctx)
			return r.summary(ctx), fmt.Errorf("launch %s: %w", r.spec.Fleet, err)
		case err != nil:
			// Rents landing between pages make a listing incomplete;
			// look again soon rather than a whole interval later.
			r.emit(Event{Event: EvWarn, At: tickStart, Msg: "instance listing failed; retrying: " + err.Error()})
			next = tickStart.Add(min(r.spec.PollEvery, listRetry))
		default:
			r.listPages = l.Pages
			r.land(ctx)
			done := r.tick(ctx, l, r.now())
			if ctx.Err() != nil {
				return r.interrupted(ctx)
			}
			if done {
				return r.finish(ctx)
			}
		}
		r.emit(Event{Event: EvProgress, At: r.now(), Progress: r.progress()})
		if err := r.between(ctx, tickStart, next); err != nil {
			return r.interrupted(ctx)
		}
	}
}

// between runs the time between two listings, until next: rents go out
// at the limiter's pace, and while instances are on their way into
// running the fleet is watched. An error: the context ended.
func (r *runner) between(ctx context.Context, tickStart, next time.Time) error {
	every := r.watchEvery()
	look := tickStart.Add(every)
	for {
		r.land(ctx)
		wait := r.dispatch(ctx)
		now := r.now()
		watch := next.Sub(look) >= every/2 && r.watching()
		if watch && !now.Before(look) {
			r.watch(ctx)
			look = look.Add(every)
			continue
		}
		d := next.Sub(now)
		if d <= 0 {
			return nil
		}
		if wait > 0 && wait < d {
			d = wait
		}
		if watch && look.Sub(now) < d {
			d = look.Sub(now)
		}
		if err := r.sleep(ctx, d); err != nil {
			return err
		}
	}
}
