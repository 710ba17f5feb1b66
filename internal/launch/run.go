package launch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
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
	phase                  phase
	state                  string // last seen actual_status
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

	// Interruptible nodes: what the node bids ($/hr), whether a rival
	// outbid it (until it runs again), and when the last change bid went.
	bid     float64
	outbid  bool
	rebidAt time.Time
}

func (n *node) booted() bool { return n.phase != phBooting }

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

type runner struct {
	m      *fleet.Manager
	store  string // the store's id, as labels carry it
	spec   Spec
	cands  []market.Ranked
	byOff  map[int64]market.Offer
	rank   map[int64]int // offer id → position in the ranking
	emit   func(Event)
	create provider.CreateRequest

	nodes      map[int64]*node
	destroying map[int64]time.Time // destroy sent (when), not yet proven gone
	// goingDPH is what the instances being destroyed still bill per hour:
	// they count against --max-dph until a listing shows them gone.
	goingDPH   map[int64]float64
	usedOffers map[int64]bool // offers with an intent in this fleet: never rented again
	machines   map[int64]int  // live nodes per machine
	bad        map[int64]bool

	start, deadline time.Time
	// since is when this process took the launch over (its start, or
	// the resume): boots of instances rented before it are not timed,
	// as their time would include the pause.
	since     time.Time
	released  bool
	finishing bool
	lim       *rate.Limiter
	spent     float64 // compute and storage, from observed states
	// pulls is the bandwidth record of every instance this run rented or
	// tracked, destroyed ones included: what they pulled (as listings
	// report it) or are expected to pull (the estimate).
	pulls map[int64]*store.Instance
	// bwBefore is the bandwidth of this fleet's instances that were gone
	// before a resume.
	bwBefore  float64
	lastTick  time.Time
	rentsOK   int // instances rented into this fleet, ever
	failed    int
	destroyed int
	capHit    string // a cap that stopped renting for good
	dphCapped string // set once --max-dph held a rent back
	outbids   int    // outbid episodes seen (interruptible launches)
	rebids    int    // change bids sent
	bootDur   []time.Duration
	// releaseDur: how long released instances took to run again.
	releaseDur []time.Duration

	inflight map[int64]market.Ranked // rents started, not landed (main goroutine only)
	wg       sync.WaitGroup
	resMu    sync.Mutex
	results  []rentResult
}

// Run launches spec.Count instances from the ranked candidates (best
// first). It creates the fleet row with the spec and candidates first, so
// that Resume can continue after a crash. events may be nil.
func Run(ctx context.Context, m *fleet.Manager, spec Spec, candidates []market.Ranked, events func(Event)) (Summary, error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return Summary{}, err
	}
	now := m.Clock.Now()
	if _, err := m.S.GetFleet(ctx, spec.Fleet); err == nil {
		return Summary{}, fmt.Errorf("%w: %q; use --resume %s to continue it, or another --fleet name", ErrFleetExists, spec.Fleet, spec.Fleet)
	} else if !errors.Is(err, store.ErrNotFound) {
		return Summary{}, err
	}
	bad, err := badHosts(ctx, m, now)
	if err != nil {
		return Summary{}, err
	}
	candidates = priceAt(candidates, spec.Create.Disk)
	candidates, bidNote, err := atBid(spec, candidates)
	if err != nil {
		return Summary{}, err
	}
	candidates, slow := bootableFirst(candidates, spec.ImageGB, spec.BootTimeout/2)
	caps, err := CheckCaps(spec, candidates, bad)
	if err != nil {
		if bidNote != "" {
			err = fmt.Errorf("%w (%s)", err, bidNote)
		}
		return Summary{}, err
	}
	spec.Budget = caps.Budget // a default budget is kept for --resume
	win := newWindow(now, spec.Deadline)
	raw, secret, err := encodeStored(spec, candidates, win)
	if err != nil {
		return Summary{}, err
	}
	// The secrets go first: a fleet row whose secrets are missing cannot
	// be resumed. The data dir's lock and the check above keep another
	// launch of this name from racing the write.
	if secret != nil {
		if err := m.S.SaveSecret(ctx, secretName(spec.Fleet), secret); err != nil {
			return Summary{}, fmt.Errorf("launch %s: %w", spec.Fleet, err)
		}
	}
	if err := m.S.CreateFleet(ctx, store.Fleet{Name: spec.Fleet, CreatedAt: now, Spec: raw, State: store.FleetActive,
		EstDPH: caps.DPH, EstHours: caps.Horizon.Hours(), EstCost: caps.Projected}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return Summary{}, fmt.Errorf("%w: %q", ErrFleetExists, spec.Fleet)
		}
		return Summary{}, err
	}
	r := newRunner(m, spec, candidates, events, bad, win, now)
	msg := fmt.Sprintf("launching %d instances (fleet %s): first %d offers at $%.3f/hr plus $%.2f of image pulls; %s; at most %d rentals",
		spec.Count, spec.Fleet, len(caps.Picked), caps.DPH, caps.Bandwidth, budgetNote(spec, caps), spec.MaxRentals)
	if slow > 0 {
		msg += fmt.Sprintf("; %d offers that cannot pull a %.1f GB image within half the %s boot timeout ranked last", slow, spec.ImageGB, spec.BootTimeout)
	}
	if spec.Bid != nil {
		msg += "; " + bidName(*spec.Bid) + strings.TrimSuffix("; "+bidNote, "; ")
	}
	r.emit(Event{Event: EvStart, At: now, Msg: msg})
	return r.loop(ctx)
}

// bootableFirst moves the offers whose estimated boot (pull at their
// download speed, then setup) exceeds budget behind the others, keeping
// the ranking within each group: renting them mostly buys a boot timeout.
func bootableFirst(cands []market.Ranked, imageGB float64, budget time.Duration) ([]market.Ranked, int) {
	fast := make([]market.Ranked, 0, len(cands))
	var slow []market.Ranked
	for _, c := range cands {
		if plan.BootTime(imageGB, c.Offer.InetDown) > budget {
			slow = append(slow, c)
		} else {
			fast = append(fast, c)
		}
	}
	return append(fast, slow...), len(slow)
}

// Resume continues a launch from its fleet row: it reconciles the store
// with the marketplace first, tracks the fleet's live instances, never
// rents an offer that has an intent in this fleet, and runs the launch to
// its end within its original deadline. A resume after the deadline rents
// nothing: it releases what is parked, destroys what is not running and
// reports.
func Resume(ctx context.Context, m *fleet.Manager, fleetName string, events func(Event)) (Summary, error) {
	f, err := m.S.GetFleet(ctx, fleetName)
	if err != nil {
		return Summary{}, err
	}
	st, err := decodeStored(f.Spec, func() ([]byte, error) {
		return m.S.LoadSecret(ctx, secretName(fleetName))
	})
	if err != nil {
		return Summary{}, fmt.Errorf("resume %s: %w", fleetName, err)
	}
	spec, cands := st.Spec.WithDefaults(), st.Candidates
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return Summary{}, fmt.Errorf("resume %s: %w", fleetName, err)
	}
	now := m.Clock.Now()
	bad, err := badHosts(ctx, m, now)
	if err != nil {
		return Summary{}, err
	}
	r := newRunner(m, spec, cands, events, bad, st.window(f.CreatedAt), now)
	intents, err := m.S.FleetIntents(ctx, fleetName)
	if err != nil {
		return Summary{}, err
	}
	for _, it := range intents {
		r.usedOffers[it.OfferID] = true
		if it.State == store.IntentCreated {
			r.rentsOK++
		}
	}
	if v, err := m.S.GetMeta(ctx, releasedKey(fleetName)); err == nil && v != "" {
		r.released = true
	}
	ins, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: fleetName})
	if err != nil {
		return Summary{}, err
	}
	for _, in := range ins {
		if in.Wanted == store.WantDestroy {
			r.destroying[in.ID] = time.Time{}
			continue
		}
		r.track(in)
	}
	if c, err := m.Cost(ctx, fleetName); err == nil {
		r.spent = c.Compute + c.Storage
		for _, ic := range c.Instances {
			if _, tracked := r.pulls[ic.InstanceID]; !tracked {
				r.bwBefore += ic.Bandwidth
			}
		}
	}
	msg := fmt.Sprintf("resuming fleet %s: %d live instances, %d rented so far", fleetName, len(r.nodes), r.rentsOK)
	switch {
	case r.deadline.IsZero():
	case now.Before(r.deadline):
		msg += fmt.Sprintf("; %s left of the deadline", r.deadline.Sub(now).Round(time.Second))
	default:
		msg += fmt.Sprintf("; the deadline passed %s ago: releasing what is parked, destroying what is not running", now.Sub(r.deadline).Round(time.Second))
	}
	r.emit(Event{Event: EvStart, At: now, Msg: msg})
	return r.loop(ctx)
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

func badHosts(ctx context.Context, m *fleet.Manager, now time.Time) (map[int64]bool, error) {
	hs, err := m.S.BadHosts(ctx, now)
	if err != nil {
		return nil, err
	}
	bad := make(map[int64]bool, len(hs))
	for _, h := range hs {
		bad[h.MachineID] = true
	}
	return bad, nil
}

func newRunner(m *fleet.Manager, spec Spec, cands []market.Ranked, events func(Event), bad map[int64]bool, win window, now time.Time) *runner {
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
		m: m, spec: spec, cands: cands, byOff: byOff, rank: rank, emit: emit, create: create,
		nodes: map[int64]*node{}, destroying: map[int64]time.Time{}, goingDPH: map[int64]float64{}, usedOffers: map[int64]bool{},
		pulls:    map[int64]*store.Instance{},
		machines: map[int64]int{}, bad: bad, start: win.start, deadline: win.deadline, since: now, lastTick: now,
		inflight: map[int64]market.Ranked{},
		lim:      rate.NewLimiter(rate.Limit(spec.RentRate), max(1, int(spec.RentRate))),
	}
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
		state: in.State, sshHost: in.SSHHost, sshPort: in.SSHPort}
	if r.spec.Bid != nil && in.DPHTotal > in.StorageDPH {
		// The store holds the bid last set (rent, then change bid).
		n.bid, n.offer.DPHTotal = in.DPHTotal-in.StorageDPH, in.DPHTotal
	}
	now := r.now()
	switch {
	case in.Wanted == store.WantParked && in.State == provider.StateStopped && r.released:
		n.phase, n.releasedAt = phParked, now // the release wave starts it again
	case in.Wanted == store.WantParked && in.State == provider.StateStopped:
		n.phase = phParked
	case in.Wanted == store.WantParked:
		n.phase, n.stopSentAt = phParking, time.Time{}
	case in.State == provider.StateRunning && (r.released || !r.spec.Park):
		n.phase = phReady
	case in.State == provider.StateStopped && r.released:
		n.phase, n.releasedAt = phReleasing, now
	default:
		n.phase = phBooting
	}
	r.nodes[n.id] = n
	r.machines[n.machineID]++
	r.usedOffers[n.offerID] = true
	if _, ok := r.pulls[in.ID]; !ok {
		p := store.Instance{ID: in.ID, State: in.State, Bandwidth: in.Bandwidth}
		if p.Bandwidth.PullGB == 0 {
			p.Bandwidth.PullGB = r.spec.ImageGB
		}
		if p.Bandwidth.DownCost == 0 && p.Bandwidth.UpCost == 0 {
			p.Bandwidth.DownCost, p.Bandwidth.UpCost, p.Bandwidth.DownMbps = o.InetDownCost, o.InetUpCost, o.InetDown
		}
		r.pulls[in.ID] = &p
	}
	return n
}

// bandwidth is what this run's rentals have cost in bandwidth so far
// (reported, or estimated until a listing reports it), and what the
// booting ones are still expected to pull.
func (r *runner) bandwidth(now time.Time) (spent, pending float64) {
	spent = r.bwBefore
	for id, p := range r.pulls {
		got, _ := fleet.BandwidthOf(*p, now)
		spent += got
		if n, live := r.nodes[id]; live && n.phase == phBooting && !n.dropping {
			est := market.TransferCost(p.Bandwidth.PullGB, 0, p.Bandwidth.DownCost, p.Bandwidth.UpCost)
			pending += max(est-got, 0)
		}
	}
	return spent, pending
}

// projected is what the launch will have spent once what it runs now is
// stopped: spent so far, the pulls still under way, and the live rate
// for the two polls it takes to see and destroy.
func (r *runner) projected(now time.Time) (total, bandwidth float64) {
	bw, pending := r.bandwidth(now)
	rate := 0.0
	for _, n := range r.nodes {
		rate += n.rate()
	}
	return r.spent + bw + pending + rate*(2*r.spec.PollEvery).Hours(), bw + pending
}

func (r *runner) now() time.Time { return r.m.Clock.Now() }

// actorClock is implemented by virtual clocks (clock.Virtual) that
// move only when every goroutine of the launch is asleep; the launch tells
// them how many it runs.
type actorClock interface{ Busy(delta int) }

func (r *runner) busy(d int) {
	if a, ok := r.m.Clock.(actorClock); ok {
		a.Busy(d)
	}
}

func (r *runner) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return r.m.Clock.Sleep(ctx, d)
}

// loop is the one goroutine that drives the launch: one batched listing per
// tick, then the transitions it implies, then rents.
func (r *runner) loop(ctx context.Context) (Summary, error) {
	r.busy(1)
	defer r.busy(-1)
	for {
		if ctx.Err() != nil {
			return r.interrupted(ctx)
		}
		tickStart := r.now()
		next := tickStart.Add(r.spec.PollEvery)
		l, err := r.m.P.ListInstances(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return r.interrupted(ctx)
			}
			if errors.Is(err, provider.ErrAuth) {
				r.settle(ctx)
				return r.summary(ctx), fmt.Errorf("launch %s: %w", r.spec.Fleet, err)
			}
			// Rents landing between pages make a listing incomplete;
			// look again soon rather than a whole interval later.
			r.emit(Event{Event: EvWarn, At: tickStart, Msg: "instance listing failed; retrying: " + err.Error()})
			next = tickStart.Add(min(r.spec.PollEvery, listRetry))
		} else {
			r.land(ctx)
			now := r.now()
			toDestroy := r.observe(ctx, l, now)
			toDestroy = append(toDestroy, r.transitions(ctx, now)...)
			done := r.decide(ctx, now, &toDestroy)
			r.destroy(ctx, toDestroy)
			if ctx.Err() != nil {
				return r.interrupted(ctx)
			}
			if done {
				return r.finish(ctx)
			}
		}
		r.emit(Event{Event: EvProgress, At: r.now(), Progress: r.progress()})
		// Between listings, rents go out at the limiter's pace.
		for {
			r.land(ctx)
			wait := r.dispatch(ctx)
			d := next.Sub(r.now())
			if d <= 0 {
				break
			}
			if wait > 0 && wait < d {
				d = wait
			}
			if err := r.sleep(ctx, d); err != nil {
				return r.interrupted(ctx)
			}
		}
	}
}

// observe applies one complete listing: states into the store (on change
// only: the store fsyncs every commit), spend, adoption of our rentals the
// store did not record, and gone instances.
func (r *runner) observe(ctx context.Context, l provider.Listing, now time.Time) []int64 {
	prev := r.lastTick
	dt := now.Sub(r.lastTick)
	if dt > 0 {
		for _, n := range r.nodes {
			r.spent += n.rate() * dt.Hours()
		}
	}
	r.lastTick = now
	listed := make(map[int64]provider.Instance, len(l.Instances))
	var redo []int64
	for _, row := range l.Instances {
		listed[row.ID] = row
		if _, ok := r.nodes[row.ID]; ok {
			continue
		}
		if sent, ok := r.destroying[row.ID]; ok {
			if now.Sub(sent) > 2*r.spec.PollEvery+30*time.Second {
				redo = append(redo, row.ID) // the last destroy gave up
			}
			continue
		}
		label, ok := fleet.ParseLabel(row.LabelText())
		if !ok || label.Fleet != r.spec.Fleet || label.Store != r.storeID(ctx) {
			continue
		}
		r.adopt(ctx, row, label.Intent, now)
	}
	for id := range r.destroying {
		if _, ok := listed[id]; !ok {
			if err := r.m.S.MarkGone(ctx, id, now); err == nil || errors.Is(err, store.ErrNotFound) {
				delete(r.destroying, id)
				delete(r.goingDPH, id)
				if p := r.pulls[id]; p != nil && p.GoneAt.IsZero() {
					p.GoneAt = now
				}
			}
		}
	}
	var seenRows []provider.Instance
	for _, n := range r.sorted() {
		row, ok := listed[n.id]
		if !ok {
			if now.Sub(n.rentedAt) < r.grace() {
				continue // marketplaces list new rentals late
			}
			// A complete listing without it, past the grace period: gone.
			_ = r.m.S.MarkGone(ctx, n.id, now)
			if p := r.pulls[n.id]; p != nil {
				p.GoneAt = now
			}
			r.forget(n)
			r.failed++
			r.emit(Event{Event: EvFailed, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, Msg: "vanished from the listing"})
			continue
		}
		n.seen = true
		st := row.Status()
		host, port, _ := provider.SSHAddr(row)
		n.intended, n.statusMsg = row.IntendedStatus, row.StatusMsg
		if st != n.state || host != n.sshHost || port != n.sshPort {
			if err := r.m.S.UpdateSeenAfter(ctx, n.id, st, host, port, provider.SSHURL(row), prev, now); err != nil {
				r.emit(Event{Event: EvWarn, At: now, InstanceID: n.id, Msg: err.Error()})
			}
			n.state, n.sshHost, n.sshPort = st, host, port
		}
		seenRows = append(seenRows, row)
		if p := r.pulls[n.id]; p != nil {
			if rep := fleet.BandwidthReports(row); len(rep) == 1 {
				p.Bandwidth = p.Bandwidth.Reported(rep[0], st, now)
			}
			p.State = st
		}
	}
	// One transaction for the whole listing's bandwidth figures.
	if err := r.m.S.RecordBandwidth(ctx, fleet.BandwidthReports(seenRows...), now); err != nil {
		r.emit(Event{Event: EvWarn, At: now, Msg: err.Error()})
	}
	return redo
}

// storeID is the id of the store this launch records into; rentals
// labelled with another store's id are never adopted.
func (r *runner) storeID(ctx context.Context) string {
	if r.store == "" {
		if id, err := r.m.S.ID(ctx); err == nil {
			r.store = id
		}
	}
	return r.store
}

func (r *runner) grace() time.Duration {
	if r.m.Grace > 0 {
		return r.m.Grace
	}
	return fleet.DefaultGrace
}

// adopt records a listed instance whose label names this fleet but that
// this run does not track: a rental whose response was lost, or made by a
// process killed before it could record it.
func (r *runner) adopt(ctx context.Context, row provider.Instance, intentID int64, now time.Time) {
	in, err := r.m.S.Instance(ctx, row.ID)
	if err == nil && r.inflight[in.OfferID].ID != 0 {
		return // its rent is still running and will report it
	}
	if errors.Is(err, store.ErrNotFound) {
		it, ierr := r.m.S.IntentByLabel(ctx, row.LabelText())
		if ierr != nil || it.ID != intentID {
			return // not this store's: reconcile reports it as an orphan
		}
		if r.inflight[it.OfferID].ID != 0 {
			return
		}
		rec := store.Instance{ID: row.ID, Fleet: r.spec.Fleet, OfferID: it.OfferID, MachineID: row.MachineID,
			GPUName: row.GPUName, NumGPUs: row.NumGPUs, CPUCores: float64(row.CPUCores), RAMMB: row.CPURAM,
			DPHTotal: row.DPHTotal, StorageDPH: row.StorageTotalCost, Label: it.Label, State: row.Status(),
			Wanted: store.WantRunning, CreatedAt: it.CreatedAt, SSHHost: row.SSHHost, SSHPort: row.SSHPort}
		if err := r.m.S.RecordCreated(ctx, it.ID, rec, now); err != nil {
			r.emit(Event{Event: EvWarn, At: now, InstanceID: row.ID, Msg: "adopt: " + err.Error()})
			return
		}
		if in, err = r.m.S.Instance(ctx, row.ID); err != nil {
			return
		}
		r.rentsOK++
	} else if err != nil {
		return
	}
	if !in.GoneAt.IsZero() {
		host, port, _ := provider.SSHAddr(row)
		_ = r.m.S.UpdateSeen(ctx, row.ID, row.Status(), host, port, provider.SSHURL(row), now)
	}
	if in.Wanted == store.WantDestroy {
		r.destroying[row.ID] = time.Time{}
		return
	}
	n := r.track(in)
	r.emit(Event{Event: EvRented, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, Msg: "adopted by label"})
}

func (r *runner) sorted() []*node {
	out := make([]*node, 0, len(r.nodes))
	for _, n := range r.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (r *runner) forget(n *node) {
	delete(r.nodes, n.id)
	if r.machines[n.machineID]--; r.machines[n.machineID] <= 0 {
		delete(r.machines, n.machineID)
	}
}

// fail handles an instance that will not serve: with backfill it is
// destroyed now (and replaced by fill); without, it is left until the end,
// as the manual recipe does. Its machine is remembered either way.
func (r *runner) fail(ctx context.Context, n *node, reason string, now time.Time) []int64 {
	if n.doomed {
		return nil
	}
	r.failed++
	if err := r.m.S.MarkBadHost(ctx, store.BadHost{MachineID: n.machineID, Reason: reason, FailedAt: now, Until: now.Add(r.spec.BadHostTTL)}); err != nil {
		r.emit(Event{Event: EvWarn, At: now, Msg: err.Error()})
	}
	r.bad[n.machineID] = true
	r.emit(Event{Event: EvFailed, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, State: n.state, Msg: reason})
	if !r.spec.Backfill {
		n.doomed = true
		return nil
	}
	n.dropping = true
	return []int64{n.id}
}

// transitions moves every node on from what the listing showed; it stops
// (parks) newly running instances and returns the nodes to destroy.
func (r *runner) transitions(ctx context.Context, now time.Time) []int64 {
	var out []int64
	var stop, start []*node
	var rebid []bidChange
	for _, n := range r.sorted() {
		if n.doomed || n.dropping || !n.seen {
			continue
		}
		st := n.state
		if st == provider.StateUnknown {
			if n.unknownSince.IsZero() {
				n.unknownSince = now
			}
		} else {
			n.unknownSince = time.Time{}
		}
		if r.spec.Bid != nil {
			if act, ok := r.outbidCheck(n, now); ok {
				if act.drop {
					out = append(out, r.failOutbid(n, now)...)
				} else if act.price > 0 {
					rebid = append(rebid, bidChange{n, act.price})
				}
				continue
			}
		}
		switch {
		case st == provider.StateExited:
			out = append(out, r.fail(ctx, n, "container exited", now)...)
			continue
		case st == provider.StateOffline:
			out = append(out, r.fail(ctx, n, "host went offline", now)...)
			continue
		case st == provider.StateUnknown && now.Sub(n.unknownSince) >= UnknownFor:
			out = append(out, r.fail(ctx, n, "no host heartbeat for "+UnknownFor.String(), now)...)
			continue
		}
		switch n.phase {
		case phBooting:
			if st == provider.StateRunning {
				if !n.rentedAt.Before(r.since) {
					r.bootDur = append(r.bootDur, now.Sub(n.rentedAt))
				}
				r.emit(Event{Event: EvReady, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, State: st,
					Msg: "booted in " + now.Sub(n.rentedAt).Round(time.Second).String()})
				// Past the deadline (a resume after it) the release is
				// due: a stop now would only risk the GPUs.
				if r.spec.Park && !r.released && (r.deadline.IsZero() || now.Before(r.deadline)) {
					n.phase = phParking
					stop = append(stop, n)
				} else {
					n.phase = phReady
				}
			} else if now.Sub(n.rentedAt) > r.spec.BootTimeout {
				out = append(out, r.fail(ctx, n, "still "+stateName(st)+" after the "+r.spec.BootTimeout.String()+" boot timeout", now)...)
			}
		case phParking:
			switch {
			case st == provider.StateStopped:
				n.phase = phParked
				r.emit(Event{Event: EvParked, At: now, InstanceID: n.id, State: st})
			case now.Sub(n.stopSentAt) >= 2*r.spec.PollEvery:
				stop = append(stop, n) // the stop did not take (or was never sent before a crash)
			}
		case phReleasing:
			switch {
			case st == provider.StateRunning:
				n.phase = phReady
				if !n.releasedAt.Before(r.since) {
					r.releaseDur = append(r.releaseDur, now.Sub(n.releasedAt))
				}
				r.emit(Event{Event: EvRunning, At: now, InstanceID: n.id, State: st})
			case scheduling(n) && now.Sub(n.startSentAt) >= SchedulingFor:
				// Waiting for GPUs another renter holds: it may wait for
				// ever, so it is replaced now rather than at the timeout.
				out = append(out, r.fail(ctx, n, "scheduling "+now.Sub(n.startSentAt).Round(time.Second).String()+" after the release: its GPUs were taken", now)...)
			case now.Sub(n.releasedAt) > r.spec.ReleaseTimeout:
				out = append(out, r.fail(ctx, n, "not running "+r.spec.ReleaseTimeout.String()+" after the release (its GPUs were probably taken)", now)...)
			case st == provider.StateStopped && !scheduling(n) &&
				(!n.startOK || n.intended != provider.StateRunning && now.Sub(n.startSentAt) >= 2*r.spec.PollEvery):
				start = append(start, n) // the start failed, or did not take
			}
		}
	}
	r.parallel(ctx, stop, func(ctx context.Context, n *node) error {
		n.stopSentAt = now
		if err := r.m.P.StopInstance(ctx, n.id); err != nil {
			return err
		}
		return r.m.S.SetWanted(ctx, n.id, store.WantParked)
	})
	r.sendStart(ctx, start, now)
	r.changeBids(ctx, rebid, now)
	return out
}

// SchedulingFor is how long a released instance may show "Scheduling"
// (waiting for its GPUs) before it is replaced: vast's own help calls
// anything past about 30 seconds resources that are not available.
const SchedulingFor = 30 * time.Second

// scheduling: the listing shows the node waiting for its GPUs after a
// start. Vast says so only in status_msg; actual_status stays "stopped".
func scheduling(n *node) bool {
	return n.state == provider.StateStopped && strings.HasPrefix(strings.ToLower(strings.TrimSpace(n.statusMsg)), "scheduling")
}

func stateName(s string) string {
	if s == "" {
		return "provisioning"
	}
	return s
}

// parallel runs fn for each node with at most Workers at once; failures are
// reported as warnings (the next tick retries what needs retrying).
func (r *runner) parallel(ctx context.Context, ns []*node, fn func(context.Context, *node) error) {
	if len(ns) == 0 {
		return
	}
	var g errgroup.Group
	g.SetLimit(r.spec.Workers)
	// The calling loop waits; the workers are the busy ones.
	r.busy(-1)
	defer r.busy(1)
	for _, n := range ns {
		g.Go(func() error {
			r.busy(1)
			defer r.busy(-1)
			if err := fn(ctx, n); err != nil && ctx.Err() == nil {
				r.emit(Event{Event: EvWarn, At: r.now(), InstanceID: n.id, Msg: err.Error()})
			}
			return nil
		})
	}
	_ = g.Wait()
}

// counts by phase, not counting doomed nodes.
type counts struct{ booting, parking, parked, releasing, ready, doomed int }

func (r *runner) counts() counts {
	var c counts
	for _, n := range r.nodes {
		if n.dropping {
			continue
		}
		if n.doomed {
			c.doomed++
			continue
		}
		if n.outbid && n.phase != phBooting {
			c.booting++ // stopped by a rival: not serving until it runs again
			continue
		}
		switch n.phase {
		case phBooting:
			c.booting++
		case phParking:
			c.parking++
		case phParked:
			c.parked++
		case phReleasing:
			c.releasing++
		case phReady:
			c.ready++
		}
	}
	return c
}

// spares is how many spares the launch rents while parking.
func (r *runner) spares() int {
	return spareCount(r.spec.Park, r.spec.Backfill, r.released, r.spec.Spare, r.spec.Count)
}

// target is how many live slots the launch keeps.
func (r *runner) target() int { return r.spec.Count + r.spares() }

// worstFirst orders nodes by rank, worst first (what trimming drops).
func (r *runner) worstFirst(ns []*node) {
	sort.SliceStable(ns, func(i, j int) bool {
		ri, rj := r.rankOf(ns[i].offerID), r.rankOf(ns[j].offerID)
		if ri != rj {
			return ri > rj
		}
		return ns[i].id > ns[j].id
	})
}

func (r *runner) rankOf(offerID int64) int {
	if i, ok := r.rank[offerID]; ok {
		return i
	}
	return len(r.rank)
}

// decide runs the release wave, trims surplus and reports whether the
// launch is over. It adds nodes to destroy.
func (r *runner) decide(ctx context.Context, now time.Time, toDestroy *[]int64) bool {
	c := r.counts()
	booted := c.parking + c.parked + c.releasing + c.ready
	pastDeadline := !r.deadline.IsZero() && !now.Before(r.deadline)
	if r.spec.Budget > 0 && !r.finishing {
		if total, bw := r.projected(now); total >= r.spec.Budget {
			r.capStop(now, fmt.Sprintf("budget cap $%.2f reached ($%.2f projected once what runs is stopped, $%.2f of it bandwidth)", r.spec.Budget, total, bw))
			r.finishing = true
		}
	}
	if pastDeadline && !r.finishing {
		r.finishing = true
		r.emit(Event{Event: EvDeadline, At: now, Msg: fmt.Sprintf("deadline: %d of %d booted", booted, r.spec.Count)})
	}
	drop := func(n *node, why string) {
		if n.dropping {
			return
		}
		n.dropping = true
		*toDestroy = append(*toDestroy, n.id)
		r.emit(Event{Event: EvDestroyed, At: now, InstanceID: n.id, OfferID: n.offerID, State: n.state, Msg: why})
	}
	// Complete: Count run and none is parked; everything else is surplus.
	if (r.released || !r.spec.Park) && c.ready >= r.spec.Count {
		var ready []*node
		for _, n := range r.sorted() {
			if n.dropping {
				continue
			}
			if n.phase == phReady && !n.doomed && !n.outbid {
				ready = append(ready, n)
			} else {
				drop(n, "surplus: the fleet is complete")
			}
		}
		r.worstFirst(ready)
		for _, n := range ready[:len(ready)-r.spec.Count] {
			drop(n, "surplus: more running than asked")
		}
		return true
	}
	// With backfill, hedged spares can boot beyond the target; those still
	// loading are surplus once it is met, and so are the worst booted ones
	// beyond it.
	if target := r.target(); r.spec.Backfill && !r.released && booted >= target {
		var up []*node
		for _, n := range r.sorted() {
			switch {
			case n.doomed || n.dropping:
			case n.phase == phBooting:
				drop(n, "surplus: enough instances booted")
			default:
				up = append(up, n)
			}
		}
		r.worstFirst(up)
		if extra := len(up) - target; extra > 0 {
			for _, n := range up[:extra] {
				drop(n, "surplus: more booted than needed")
			}
		}
		c = r.counts()
	}
	canRent := !r.finishing && r.capHit == "" && r.moreCandidates()
	if r.spec.Park && !r.released {
		due, why := releaseDue(releaseView{
			park: r.spec.Park, released: r.released, finishing: r.finishing, backfill: r.spec.Backfill,
			now: now, deadline: r.deadline, lead: r.releaseLead(),
			booting: c.booting, booted: booted, up: c.parking + c.parked + c.ready,
			quorum:  min(r.target(), r.spec.MinReady+r.spares()),
			canRent: canRent, rentsOK: r.rentsOK, count: r.spec.Count,
		})
		if due {
			r.releaseWave(ctx, now, c, why)
			c = r.counts()
		}
	} else if r.released {
		// Parked nodes left behind by a crash during the wave.
		var late []*node
		for _, n := range r.sorted() {
			if n.phase == phParked && !n.doomed {
				late = append(late, n)
			}
		}
		r.start1(ctx, late, now)
		c = r.counts()
	}
	if r.finishing {
		// Unready instances are destroyed; released ones get their
		// release timeout.
		for _, n := range r.sorted() {
			if n.phase == phBooting || n.doomed {
				drop(n, "not running at the end of the launch")
			}
		}
	}
	switch ending(endView{
		finishing: r.finishing,
		booting:   c.booting, parking: c.parking, parked: c.parked, releasing: c.releasing, doomed: c.doomed,
		canRent: canRent, backfill: r.spec.Backfill, rentsOK: r.rentsOK, count: r.spec.Count,
		noDeadline: r.deadline.IsZero(),
	}) {
	case launchDone:
		return true
	case startEnd:
		r.finishing = true
	}
	return false
}

// releaseLead is how long before the deadline this launch releases.
func (r *runner) releaseLead() time.Duration {
	return releaseLead(r.releaseDur, r.spec.Deadline, r.spec.ReleaseTimeout, r.spec.PollEvery)
}

func (r *runner) moreCandidates() bool {
	for _, c := range r.cands {
		if r.usable(c) {
			return true
		}
	}
	return false
}

func (r *runner) usable(c market.Ranked) bool {
	return !r.usedOffers[c.ID] && !r.bad[c.MachineID] && c.DPHTotal > 0 &&
		(r.spec.AllowSameMachine || r.machines[c.MachineID] == 0)
}

func (r *runner) releaseWave(ctx context.Context, now time.Time, c counts, why string) {
	r.released = true
	if err := r.m.S.SetMeta(ctx, releasedKey(r.spec.Fleet), now.UTC().Format(time.RFC3339Nano)); err != nil {
		r.emit(Event{Event: EvWarn, At: now, Msg: err.Error()})
	}
	var ns []*node
	for _, n := range r.sorted() {
		if (n.phase == phParked || n.phase == phParking) && !n.doomed {
			ns = append(ns, n)
		}
	}
	r.emit(Event{Event: EvRelease, At: now, Msg: fmt.Sprintf("releasing %d parked instances (%d booted of %d asked; %s)", len(ns), c.parking+c.parked+c.ready, r.spec.Count, why)})
	r.start1(ctx, ns, now)
}

// start1 starts parked nodes and marks them releasing.
func (r *runner) start1(ctx context.Context, ns []*node, now time.Time) {
	for _, n := range ns {
		n.phase, n.releasedAt = phReleasing, now
	}
	r.sendStart(ctx, ns, now)
}

// sendStart sends a start to each node; a node whose start fails is sent
// another at the next listing (transitions), until its release timeout.
func (r *runner) sendStart(ctx context.Context, ns []*node, now time.Time) {
	r.parallel(ctx, ns, func(ctx context.Context, n *node) error {
		n.startSentAt, n.startOK = now, false
		if err := r.m.P.StartInstance(ctx, n.id); err != nil {
			return err
		}
		n.startOK = true
		return r.m.S.SetWanted(ctx, n.id, store.WantRunning)
	})
}

func (r *runner) capStop(now time.Time, msg string) {
	if r.capHit == "" {
		r.capHit = msg
		r.emit(Event{Event: EvCap, At: now, Msg: "stopped at " + msg})
	}
}

// destroy destroys nodes through the manager (confirmed by listing); a
// destroy not yet confirmed is retried at the next tick.
func (r *runner) destroy(ctx context.Context, ids []int64) {
	if len(ids) == 0 {
		return
	}
	seen := map[int64]bool{}
	var uniq []int64
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	now := r.now()
	for _, id := range uniq {
		if p := r.pulls[id]; p != nil && p.DestroyRequestedAt.IsZero() {
			p.DestroyRequestedAt = now
		}
		if n, ok := r.nodes[id]; ok {
			r.forget(n)
			r.destroyed++
			r.goingDPH[id] = n.offer.DPHTotal
		}
		r.destroying[id] = now
	}
	// In the background, so that the loop keeps ticking while listings
	// confirm; bounded: an unconfirmed destroy stays "destroy requested"
	// and later listings confirm it (observe marks it gone).
	r.wg.Add(1)
	r.busy(1)
	go func() {
		defer r.wg.Done()
		defer r.busy(-1)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*r.spec.PollEvery+30*time.Second)
		defer cancel()
		if err := r.m.Destroy(dctx, uniq); err != nil {
			r.emit(Event{Event: EvWarn, At: now, Msg: "destroy: " + err.Error()})
		}
	}()
}

// dispatch starts rents while the fleet needs them, within the caps, at
// most RentRate per second and Workers at once. Rents run in the background
// (a lost create response can take minutes to settle) and land later. It
// returns how long until the next rent may go, or 0 when none is due.
func (r *runner) dispatch(ctx context.Context) time.Duration {
	for ctx.Err() == nil {
		now := r.now()
		if r.finishing || r.capHit != "" {
			return 0
		}
		if !r.deadline.IsZero() && now.Add(r.minBoot()).After(r.deadline) {
			return 0 // a new rental could not boot before the deadline
		}
		if r.need(now) <= 0 {
			return 0
		}
		if r.rentsOK+len(r.inflight) >= r.spec.MaxRentals {
			r.capStop(now, fmt.Sprintf("rental bound: %d rentals made (--max-rentals %d)", r.rentsOK+len(r.inflight), r.spec.MaxRentals))
			return 0
		}
		if len(r.inflight) >= r.spec.Workers {
			return time.Duration(float64(time.Second) / r.spec.RentRate)
		}
		if tok := r.lim.TokensAt(now); tok < 1 {
			return time.Duration((1 - tok) / r.spec.RentRate * float64(time.Second))
		}
		picks := r.pick(1, now)
		if len(picks) == 0 {
			return 0
		}
		r.lim.AllowN(now, 1)
		c := picks[0]
		r.inflight[c.ID] = c
		r.wg.Add(1)
		r.busy(1)
		go func() {
			defer r.wg.Done()
			defer r.busy(-1)
			out := rentResult{c: c}
			out.in, out.err = r.m.Rent(ctx, fleet.RentRequest{Fleet: r.spec.Fleet, Offer: c.Offer, Create: r.createFor(c.Offer), ImageGB: r.spec.ImageGB})
			r.resMu.Lock()
			r.results = append(r.results, out)
			r.resMu.Unlock()
		}()
	}
	return 0
}

type rentResult struct {
	c   market.Ranked
	in  store.Instance
	err error
}

// land takes in the rents that finished since the last tick.
func (r *runner) land(ctx context.Context) {
	r.resMu.Lock()
	res := r.results
	r.results = nil
	r.resMu.Unlock()
	for _, out := range res {
		c := out.c
		delete(r.inflight, c.ID)
		r.unreserve(c) // track re-adds the machine when the rent worked
		at := r.now()
		if out.err != nil {
			if ctx.Err() == nil {
				r.emit(Event{Event: EvRentFailed, At: at, OfferID: c.ID, MachineID: c.MachineID, Msg: out.err.Error()})
			}
			if errors.Is(out.err, provider.ErrInsufficientBalance) || errors.Is(out.err, provider.ErrAuth) {
				r.capStop(at, "account: "+out.err.Error())
			}
			continue
		}
		if _, ok := r.nodes[out.in.ID]; ok {
			continue // adopted meanwhile
		}
		r.rentsOK++
		n := r.track(out.in)
		msg := ""
		if r.rentsOK > r.spec.Count {
			msg = "replacement #" + strconv.Itoa(r.rentsOK-r.spec.Count)
		}
		r.emit(Event{Event: EvRented, At: at, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, Msg: msg})
	}
}

// waitAll waits for the background goroutines; the loop does not count as
// busy meanwhile (a virtual clock must move for them to finish).
func (r *runner) waitAll() {
	r.busy(-1)
	r.wg.Wait()
	r.busy(1)
}

// settle waits for the rents in flight and takes them in.
func (r *runner) settle(ctx context.Context) {
	r.waitAll()
	r.land(ctx)
}

// need is how many rents the fleet needs now. Without backfill, each asked
// slot gets one rental; with it, slots that failed or are hedged (loading
// past HedgeAfter) are refilled.
func (r *runner) need(now time.Time) int {
	if !r.spec.Backfill {
		return r.spec.Count - r.rentsOK - len(r.inflight)
	}
	target := r.target()
	active := len(r.inflight)
	hedge := time.Duration(-1) // r.hedgeAfter(), sorted once per call when a node needs it
	for _, n := range r.nodes {
		if n.doomed {
			continue
		}
		if n.phase == phBooting && r.spec.HedgeAfter > 0 {
			if hedge < 0 {
				hedge = r.hedgeAfter()
			}
			if now.Sub(n.rentedAt) > hedge {
				continue
			}
		}
		active++
	}
	return target - active
}

// hedgeAfter is the spec's hedge time, or longer when this fleet's boots
// so far show that normal boots take longer.
func (r *runner) hedgeAfter() time.Duration {
	h := r.spec.HedgeAfter
	if len(r.bootDur) >= 10 {
		ds := append([]time.Duration(nil), r.bootDur...)
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		if p := ds[len(ds)*8/10]; p > h {
			h = p
		}
	}
	return h
}

// minBoot is how long a new rental needs at least to boot: the fastest
// quarter of this fleet's boots, or 90 s before any was seen.
func (r *runner) minBoot() time.Duration {
	if len(r.bootDur) < 5 {
		return 90 * time.Second
	}
	ds := append([]time.Duration(nil), r.bootDur...)
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/4]
}

// liveDPH is the $/hr of every live node, as rented.
func (r *runner) liveDPH() float64 {
	s := 0.0
	for _, n := range r.nodes {
		s += n.offer.DPHTotal
	}
	for _, c := range r.inflight {
		s += c.DPHTotal
	}
	for _, d := range r.goingDPH {
		s += d
	}
	return s
}

func (r *runner) remaining(now time.Time) time.Duration {
	if !r.deadline.IsZero() {
		return max(0, r.deadline.Sub(now))
	}
	return horizon(r.spec)
}

// pick chooses up to k candidates in rank order that fit the caps, and
// reserves their offers and machines.
func (r *runner) pick(k int, now time.Time) []market.Ranked {
	dph := r.liveDPH()
	rem := r.remaining(now).Hours()
	bw, pending := r.bandwidth(now)
	committed := r.spent + bw + pending + dph*rem
	for _, c := range r.inflight {
		committed += c.PullCost(r.spec.ImageGB) // not tracked until they land
	}
	var out []market.Ranked
	blockedDPH, blockedBudget := false, false
	for _, c := range r.cands {
		if len(out) == k {
			break
		}
		if !r.usable(c) {
			continue
		}
		if r.spec.MaxDPH > 0 && dph+c.DPHTotal > r.spec.MaxDPH+1e-9 {
			blockedDPH = true
			continue
		}
		if r.spec.Budget > 0 && committed+c.DPHTotal*rem+c.PullCost(r.spec.ImageGB) > r.spec.Budget+1e-9 {
			blockedBudget = true
			continue
		}
		out = append(out, c)
		r.usedOffers[c.ID] = true
		r.machines[c.MachineID]++
		dph += c.DPHTotal
		committed += c.DPHTotal*rem + c.PullCost(r.spec.ImageGB)
	}
	if len(out) < k {
		switch {
		case blockedBudget:
			r.capStop(now, fmt.Sprintf("budget cap $%.2f: a replacement would bring spent + committed above it", r.spec.Budget))
		case blockedDPH && r.dphCapped == "":
			// Not sticky: destroying a failed instance frees room under
			// the cap, and the next pick may fit.
			r.dphCapped = fmt.Sprintf("max-dph cap $%.3f/hr: no remaining offer fits under it", r.spec.MaxDPH)
			r.emit(Event{Event: EvCap, At: now, Msg: "rent held back by the " + r.dphCapped})
		}
	}
	return out
}

func (r *runner) unreserve(c market.Ranked) {
	if r.machines[c.MachineID]--; r.machines[c.MachineID] <= 0 {
		delete(r.machines, c.MachineID)
	}
}

func (r *runner) progress() *Progress {
	c := r.counts()
	bw, _ := r.bandwidth(r.now())
	p := &Progress{Asked: r.spec.Count, Booting: c.booting, Parked: c.parking + c.parked, Releasing: c.releasing,
		Ready: c.ready, Failed: r.failed, Rented: r.rentsOK, Spent: r.spent + bw}
	for _, n := range r.nodes {
		p.DPH += n.rate()
	}
	if !r.deadline.IsZero() {
		p.TimeLeft = max(0, r.deadline.Sub(r.now()))
	}
	return p
}

// finish ends a launch and reports it. The summary is taken when the
// fleet is complete; then rents still in flight (one settling a lost
// response can take minutes) are waited for, and a last few listings make
// the store agree with the marketplace for this fleet: rentals whose
// outcome was unknown are adopted by label, and everything not ready is
// destroyed as surplus, confirmed by listing.
func (r *runner) finish(ctx context.Context) (Summary, error) {
	s := r.summary(ctx)
	before := r.destroyed
	r.waitAll()
	r.land(ctx)
	for try := 0; try < 10 && ctx.Err() == nil; try++ {
		ready := map[int64]bool{}
		for _, n := range r.readyNodes() {
			ready[n.id] = true
		}
		var extra []int64
		for _, n := range r.sorted() {
			if !ready[n.id] {
				extra = append(extra, n.id)
				r.emit(Event{Event: EvDestroyed, At: r.now(), InstanceID: n.id, OfferID: n.offerID, Msg: "surplus: rented after the launch completed"})
			}
		}
		r.destroy(ctx, extra)
		r.waitAll()
		if try > 0 && len(extra) == 0 && len(r.destroying) == 0 {
			break
		}
		l, err := r.m.P.ListInstances(ctx)
		if err != nil {
			if errors.Is(err, provider.ErrAuth) || r.sleep(ctx, listRetry) != nil {
				break
			}
			continue
		}
		r.destroy(ctx, r.observe(ctx, l, r.now()))
		r.waitAll()
	}
	s.Destroyed += r.destroyed - before
	r.emit(Event{Event: EvSummary, At: r.now(), Summary: &s})
	return s, nil
}

func (r *runner) summary(ctx context.Context) Summary {
	s := Summary{Fleet: r.spec.Fleet, Asked: r.spec.Count, MinReady: r.spec.MinReady, Rented: r.rentsOK, Failed: r.failed, Destroyed: r.destroyed,
		StoppedAtCap: r.capHit, Elapsed: r.now().Sub(r.start), EndedAt: r.now(), ReadyIDs: []int64{}}
	s.Replaced = max(0, r.rentsOK-r.spec.Count)
	s.Outbid, s.Rebids = r.outbids, r.rebids
	if !r.deadline.IsZero() {
		past := math.Round(s.EndedAt.Sub(r.deadline).Seconds()*10) / 10
		s.PastDeadlineS = &past
	}
	if s.StoppedAtCap == "" && r.dphCapped != "" && len(r.readyNodes()) < r.spec.Count {
		s.StoppedAtCap = r.dphCapped
	}
	for _, n := range r.readyNodes() {
		s.Ready++
		s.ReadyIDs = append(s.ReadyIDs, n.id)
		s.DPHTotal += n.offer.DPHTotal
		s.VCPU += n.offer.CPUCoresEffective
		s.RAMGB += n.offer.CPURAM / 1000
		s.GPUs += n.offer.NumGPUs
	}
	bw, _ := r.bandwidth(r.now())
	s.BootSpend = r.spent + bw
	if c, err := r.m.Cost(context.WithoutCancel(ctx), r.spec.Fleet); err == nil && len(c.Fleets) == 1 {
		s.BootSpend = c.Fleets[0].Total
	}
	return s
}

func (r *runner) readyNodes() []*node {
	var out []*node
	for _, n := range r.sorted() {
		if n.phase == phReady && !n.doomed && !n.dropping && n.state == provider.StateRunning {
			out = append(out, n)
		}
	}
	return out
}

// interrupted applies Spec.OnInterrupt after a cancellation; the work
// outlives the cancelled context, bounded by cleanupTimeout.
func (r *runner) interrupted(ctx context.Context) (Summary, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	r.settle(ctx)
	now := r.now()
	var ids []int64
	for _, n := range r.sorted() {
		switch r.spec.OnInterrupt {
		case InterruptDestroyAll:
			ids = append(ids, n.id)
		case InterruptDestroyUnready:
			if !n.booted() || n.doomed {
				ids = append(ids, n.id)
			}
		}
	}
	r.emit(Event{Event: EvInterrupted, At: now, Msg: fmt.Sprintf("interrupted (%s): %d instances to destroy; `launch --resume %s` continues", r.spec.OnInterrupt, len(ids), r.spec.Fleet)})
	r.destroy(cctx, ids)
	r.waitAll()
	s := r.summary(cctx)
	s.Interrupted = true
	r.emit(Event{Event: EvSummary, At: r.now(), Summary: &s})
	return s, ErrInterrupted
}
