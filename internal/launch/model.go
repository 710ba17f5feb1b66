package launch

import (
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/store"
)

// model is what the planner decides from: the launch's nodes as the
// listings showed them, the ranked offers and what is reserved of them,
// and what this launch has seen so far (boots, failures, releases,
// spend). It holds no FleetOps and no event sink, so the planner's
// methods on it cannot reach the world: what they decide comes out as
// Actions (plan.go) for the runner to apply.
type model struct {
	spec  Spec
	cands []market.Ranked
	byOff map[int64]market.Offer
	rank  map[int64]int // offer id → position in the ranking

	nodes      map[int64]*node
	destroying map[int64]time.Time // destroy sent (when), not yet proven gone
	// goingDPH is what the instances being destroyed still bill per hour:
	// they count against --max-dph until a listing shows them gone.
	goingDPH   map[int64]float64
	usedOffers map[int64]bool // offers with an intent in this fleet: never rented again
	machines   map[int64]int  // live nodes per machine
	bad        map[int64]bool
	// others are the fleet's instances a Grow leaves alone: the fleet it
	// adds to runs them, and its listing must not adopt them.
	others map[int64]bool

	start, deadline time.Time
	// since is when this process took the launch over (its start, or
	// the resume): boots of instances rented before it are not timed,
	// as their time would include the pause.
	since     time.Time
	released  bool
	finishing bool
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
	// budgetHeld is set once the budget held a rent back; it is not a
	// stop: room comes back as the deadline nears and failures go.
	budgetHeld string
	shortHW    int // nodes whose probe was short or failed
	outbids    int // outbid episodes seen (interruptible launches)
	rebids     int // change bids sent
	// bootRatios: each timed boot (rental to first seen running) over its
	// offer's estimated load time; ratio is their bootRatio, kept as boots
	// are timed rather than sorted again by every rent. gateTimes: how
	// long booted nodes took through the readiness gates (SSH, agent,
	// probe), gateTime their median. listingGap is the time between the
	// last two listings: what a gate passed now may be late by.
	bootRatios []float64
	ratio      float64
	gateTimes  []float64
	gateTime   time.Duration
	listingGap time.Duration
	// What this run saw of boots and releases, for the shares that size
	// the margins (bootShare, spares).
	bootOK, bootFailed, releaseLost int
	parkedOK, keptRunning           int     // booted instances parked, and kept running because parking did not pay
	parkedMinutes                   float64 // summed over released instances, up to their release
	// releaseDur: how long released instances took to run again.
	releaseDur []time.Duration

	inflight map[int64]market.Ranked // rents started, not landed (main goroutine only)
	canBid   bool                    // the marketplace changes bids (FleetOps.CanChangeBid)

	// plan is what the planner has decided and the runner not yet
	// applied, in order.
	plan []Action
}
