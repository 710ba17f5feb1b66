package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// UsageError is a request that contradicts itself or the command: the
// user's input, refused before anything runs (exit 2).
type UsageError = usage.Error

func usagef(format string, args ...any) error { return usage.Errorf(format, args...) }

// Request is a launch as asked (launch's flags, or a job file), before it
// is checked and made a Spec.
type Request struct {
	Fleet          string
	Count          int
	MinReady       int
	Deadline       time.Duration
	BootTimeout    time.Duration
	ReleaseTimeout time.Duration
	BadHostTTL     time.Duration
	Park, ParkAll  bool
	Backfill       bool
	Spare          float64
	MaxDPH         float64
	Budget         float64
	// BudgetSet: a budget was given (0 then turns the cap off); without
	// it the launch derives a default budget.
	BudgetSet        bool
	MaxRentals       int
	ImageGB          float64
	Image            string
	Disk             float64
	Env              string
	Onstart          string
	Sessions         []string
	Direct           bool
	AllowSameMachine bool
	Workers          int
	CreateBatch      int
	Rate             float64
	// Bid is min or a price; empty rents on demand. OnOutbid is replace
	// or rebid (empty: replace).
	Bid      string
	OnOutbid string
}

// Asked is what a launch was asked beyond its Request, for Check.
type Asked struct {
	OnInterrupt     string
	Resume          string
	From            string
	Query           []string
	Coord           string
	Items           string
	OnShortHardware string
	ReadyCheck      string
	Ladder          fleet.Ladder
	// Type is the pricing the offers are ranked at; TypeSet: it was given.
	Type    string
	TypeSet bool
	// Score and By are the ranking asked.
	Score, By string
}

// Check refuses flags that contradict each other or the command, before
// anything runs. It returns the pricing type the offers are ranked at
// (bid for a launch with a bid).
func (r Request) Check(a Asked) (string, error) {
	switch a.OnInterrupt {
	case "", InterruptKeep, InterruptDestroyUnready, InterruptDestroyAll:
	default:
		return a.Type, usagef("--on-interrupt %q: use keep, destroy-unready or destroy-all", a.OnInterrupt)
	}
	if a.Resume != "" {
		if len(a.Query) > 0 || a.From != "" {
			return a.Type, usagef("--resume continues a stored launch: give no query or --from")
		}
		return a.Type, nil
	}
	typ, err := r.pricing(a.Type, a.TypeSet)
	if err != nil {
		return a.Type, err
	}
	if err := a.checkCoord(); err != nil {
		return typ, err
	}
	return typ, a.checkChoices()
}

// checkCoord refuses what needs a coordinator without one.
func (a Asked) checkCoord() error {
	if err := a.Ladder.Validate(); err != nil {
		return usagef("%v: --idle-after and --idle-below go together, durations are positive", err)
	}
	if a.Ladder.IdleAfter > 0 && a.Coord == "" {
		return usagef("--idle-after needs --coord: only each instance's agent sees its CPU and GPU use, and it stops its instance itself")
	}
	if a.Items != "" && a.Coord == "" {
		return usagef("--items needs --coord: the coordinator hands the items out")
	}
	return nil
}

// checkChoices refuses unknown choices and offers given twice.
func (a Asked) checkChoices() error {
	if _, err := ParseOnShort(a.OnShortHardware); err != nil {
		return usagef("--on-short-hardware %q: use replace, warn or keep", a.OnShortHardware)
	}
	switch a.ReadyCheck {
	case "", "auto", "ssh", "running":
	default:
		return usagef("--ready-check %q: use ssh, running or auto", a.ReadyCheck)
	}
	if a.From != "" {
		if len(a.Query) > 0 {
			return usagef("--from %s and a query: the saved ranking already holds the offers", a.From)
		}
	} else if a.Score != "" && a.By != "" {
		return usagef("--by %s and --score: pick one", a.By)
	}
	return nil
}

// pricing checks that the ranking's prices are the rentals' prices: a bid
// rents interruptible and ranks at bid prices (the query type bid), and
// without one the rentals are on demand, so a ranking at bid or reserved
// prices would promise prices the rentals do not get.
func (r Request) pricing(typ string, typeSet bool) (string, error) {
	bidType := typ == "bid" || typ == "interruptible"
	if r.Bid == "" {
		switch {
		case bidType:
			return typ, usagef("--type %s ranks offers at interruptible prices, but without --bid the rentals would be on demand: add --bid min (each offer's min_bid + 5%%) or --bid PRICE", typ)
		case typ != "on-demand":
			return typ, usagef("--type %s: launch rents on demand or, with --bid, interruptible; drop --type, or add --bid min for interruptible", typ)
		case r.OnOutbid != "":
			return typ, usagef("--on-outbid is for interruptible launches: add --bid min or --bid PRICE")
		}
		return typ, nil
	}
	if _, err := ParseBid(r.Bid); err != nil {
		return typ, UsageError{Err: err}
	}
	switch r.OnOutbid {
	case "", OutbidReplace, OutbidRebid:
	default:
		return typ, usagef("--on-outbid %q: use replace or rebid", r.OnOutbid)
	}
	if typeSet && !bidType {
		return typ, usagef("--bid rents interruptible instances, but --type %s ranks offers at %s prices: drop --type (--bid ranks at bid prices) or use --type bid", typ, typ)
	}
	return "bid", nil
}

// Spec is the launch r asks for, checked; a fleet without a name is
// named after now.
func (r Request) Spec(onInterrupt string, now time.Time) (Spec, error) {
	if err := r.checkCounts(); err != nil {
		return Spec{}, err
	}
	env, err := ParseEnv(r.Env)
	if err != nil {
		return Spec{}, usagef("--env: %v", err)
	}
	sessions, err := r.sessions()
	if err != nil {
		return Spec{}, err
	}
	name := r.Fleet
	if name == "" {
		name = "fleet-" + now.UTC().Format("20060102-150405")
	}
	spec := Spec{
		Fleet: name, Count: r.Count, MinReady: r.MinReady, Deadline: r.Deadline,
		BootTimeout: r.BootTimeout, ReleaseTimeout: r.ReleaseTimeout,
		Park: r.Park || r.ParkAll, ParkAll: r.ParkAll, Backfill: r.Backfill, Spare: r.Spare, MaxDPH: r.MaxDPH, Budget: r.Budget, BudgetAuto: !r.BudgetSet,
		MaxRentals: r.MaxRentals, ImageGB: r.ImageGB,
		Create:   Create(r.Image, r.Disk),
		Sessions: sessions, AllowSameMachine: r.AllowSameMachine, BadHostTTL: r.BadHostTTL,
		Workers: r.Workers, RentRate: r.Rate, CreateBatch: r.CreateBatch, OnInterrupt: onInterrupt,
	}
	spec.Create.Env = env
	spec.Create.Onstart = Onstart(r.Onstart, sessions)
	spec.Create.Runtype = runtype(r.Direct)
	if r.Bid != "" {
		b, err := ParseBid(r.Bid)
		if err != nil {
			return Spec{}, UsageError{Err: err}
		}
		b.OnOutbid = r.OnOutbid
		spec.Bid = &b
	}
	if err := spec.WithDefaults().Validate(); err != nil {
		return Spec{}, UsageError{Err: err}
	}
	return spec, nil
}

// checkCounts checks the count, the quorum and the caps.
func (r Request) checkCounts() error {
	if r.Count < 1 || r.Count > MaxCount {
		return usagef("--count %d: must be 1..%d", r.Count, MaxCount)
	}
	if r.MinReady < 0 || r.MinReady > r.Count {
		return usagef("--min-ready %d: must be between 1 and --count %d", r.MinReady, r.Count)
	}
	if r.MaxDPH < 0 || r.Budget < 0 {
		return usagef("--max-dph and --budget must be positive (0 means no cap)")
	}
	if r.MaxRentals != 0 && r.MaxRentals < r.Count {
		return usagef("--max-rentals %d: must be at least --count %d", r.MaxRentals, r.Count)
	}
	return nil
}

// sessions parses the --session flags.
func (r Request) sessions() ([]Session, error) {
	var sessions []Session
	for _, s := range r.Sessions {
		sess, err := ParseSession(s)
		if err != nil {
			return nil, usagef("--session %q: %v", s, err)
		}
		sessions = append(sessions, sess)
	}
	return sessions, nil
}

// ReadRanked reads a saved ranking (search --save) to launch from;
// bid: the launch bids, so offers priced at bids are its prices.
func ReadRanked(path string, bid bool) ([]market.Ranked, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, UsageError{Err: err}
	}
	var ranked []market.Ranked
	if err := json.Unmarshal(b, &ranked); err != nil {
		return nil, usagef("--from %s: not a ranked offer list from `vastfleet search --save` (%v)", path, err)
	}
	if len(ranked) == 0 {
		return nil, usagef("--from %s: holds no offers", path)
	}
	if !bid && slices.ContainsFunc(ranked, func(r market.Ranked) bool { return r.IsBid }) {
		return nil, usagef("--from %s holds offers priced at bids (searched with -b or -i), but without --bid the rentals would be on demand: add --bid min or --bid PRICE, or search again without -b", path)
	}
	return ranked, nil
}

// BeforeRenting brings the store up to the marketplace's listing and
// saves the fleet's teardown ladder, before anything is rented: the
// coordinator's pass and reap apply the ladder from the first boot.
func BeforeRenting(ctx context.Context, m *fleet.Manager, fleetName string, l fleet.Ladder) error {
	f := opsOf(m)
	if _, err := f.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return fmt.Errorf("reconcile before launching: %w", err)
	}
	if l.IsZero() {
		return nil
	}
	return f.SaveLadder(ctx, fleetName, l)
}

// runtype is how the marketplace routes SSH: through its proxy, or (direct)
// to ports on the host as well.
func runtype(direct bool) string {
	if direct {
		return "ssh_direc ssh_proxy"
	}
	return "ssh"
}

// Rent is one rental as rent asks it (rent's flags).
type Rent struct {
	Image   string
	Disk    float64
	Env     string
	Onstart string
	Direct  bool
	// Bid is $/hr per machine; 0 rents on demand.
	Bid float64
}

// CreateRequest is the create call r asks for, checked.
func (r Rent) CreateRequest() (provider.CreateRequest, error) {
	env, err := ParseEnv(r.Env)
	if err != nil {
		return provider.CreateRequest{}, usagef("--env: %v", err)
	}
	if r.Disk < 8 {
		return provider.CreateRequest{}, usagef("--disk %v: the marketplace's minimum is 8 GB", r.Disk)
	}
	req := Create(r.Image, r.Disk)
	req.Env, req.Onstart = env, r.Onstart
	if r.Direct {
		req.Runtype = runtype(true)
	}
	if r.Bid < 0 {
		return provider.CreateRequest{}, usagef("--bid %v: must be positive", r.Bid)
	}
	if r.Bid > 0 {
		bid := r.Bid
		req.Price = &bid
	}
	return req, nil
}
