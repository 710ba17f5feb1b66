// Package launch starts fleets of 1..MaxCount instances: rents in parallel behind
// a rate limiter, parks instances (stops them) as soon as they boot so they
// bill storage only, releases them together when a quorum is ready or the
// deadline hits, backfills failures from the next ranked offers, never
// exceeds the $/hr and budget caps, and can be resumed after a crash without
// renting anything twice (every rental goes through fleet.Manager.Rent and
// its intent rows).
//
// Each tick observes one listing into the model, the planner (the
// model's methods: no I/O) turns it into a plan of actions with reasons
// (rent, park, release, replace, destroy, ...), and the runner applies
// the plan through FleetOps, the engine's one door to the store and the
// marketplace (fleet.LaunchOps implements it over a fleet.Manager).
package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/shell"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Defaults for zero Spec fields.
const (
	DefaultBootTimeout = 10 * time.Minute
	// A start after a stop that has not run within a minute or so has
	// lost its GPUs (vast-api.md): waiting longer only delays the spare.
	DefaultReleaseTimeout = 90 * time.Second
	DefaultBadHostTTL     = 24 * time.Hour
	DefaultWorkers        = 16
	DefaultRentRate       = 4.0
	DefaultPollEvery      = 15 * time.Second
	// DefaultWatchEvery dates boots and restarts within 2 s: over a
	// 300-node launch, mid-way through 15 s gaps summed to ±$0.01-0.03
	// of compute (a $5/h node's boot alone is ±$0.01), through 5 s gaps
	// to ±$0.01. A client that paces its calls spaces the watch further
	// (watchShare).
	DefaultWatchEvery = 2 * time.Second
	// UnknownFor is how long "unknown" (no host heartbeat) is tolerated.
	UnknownFor = 5 * time.Minute
	// MaxCount is the largest fleet one launch makes.
	MaxCount = plan.MaxNodes
)

// Interrupt modes (Spec.OnInterrupt).
const (
	InterruptKeep           = "keep"
	InterruptDestroyUnready = "destroy-unready"
	InterruptDestroyAll     = "destroy-all"
)

// Session is a named long-running command started on every node, like a
// screen session.
type Session struct {
	Name    string `json:"name"`
	Command string `json:"command"`
	// Restart is the agent's restart policy (wire.Session.Restart); empty
	// is its default, on-failure. Sessions without the agent ignore it.
	Restart string `json:"restart,omitempty"`
	// After is a file the agent waits for before starting the session
	// (wire.Session.After).
	After string `json:"after,omitempty"`
}

// Spec is one launch. It is stored as the fleet's spec JSON, with the ranked
// candidates, so that Resume can continue it.
type Spec struct {
	Fleet string `json:"fleet"`
	// Count is how many instances are asked for (1..MaxCount).
	Count int `json:"count"`
	// MinReady is the quorum that triggers the release wave; 0 = Count.
	MinReady int `json:"min_ready"`
	// Deadline bounds the launch from its start; 0 = none. At the deadline
	// parked instances are released, renting stops and instances that are
	// not running are destroyed.
	Deadline time.Duration `json:"deadline"`
	// BootTimeout: an instance still loading after this is destroyed and
	// its machine remembered as bad.
	BootTimeout time.Duration `json:"boot_timeout"`
	// ReleaseTimeout: a released (restarted) instance not running after
	// this is destroyed (its GPUs were most likely taken meanwhile).
	ReleaseTimeout time.Duration `json:"release_timeout"`
	// HedgeAfter: an instance still loading after this no longer counts
	// as a live slot, so a spare is rented for it (the slower of the two
	// is destroyed once the fleet is full). 0 = per instance, from its
	// offer's estimated load time (lateAfter); negative = off. A spare is
	// rented only while one could still boot before the deadline.
	HedgeAfter time.Duration `json:"hedge_after"`
	// Spare is the share of Count rented on top and parked as spares while
	// parking: a parked instance may not restart at the release (its GPUs
	// were taken), and a spare takes its place; once Count run, the rest is
	// destroyed. 0 = enough for the share of releases expected to succeed
	// (the published launch's, moved by what this one observes); negative
	// = none; only used with Park and Backfill.
	Spare float64 `json:"spare,omitempty"`
	// Park stops each instance as soon as it runs, until the release wave,
	// when parking pays: a cheap instance whose GPUs are likelier to be
	// taken than its running bill is worth is kept running (parkPays).
	Park bool `json:"park"`
	// ParkAll parks every instance that boots, whether or not it pays.
	ParkAll bool `json:"park_all,omitempty"`
	// Backfill replaces failed instances from the next ranked offers. The
	// CLI sets it from --backfill (default true); false is the "manual
	// recipe" (rent Count offers once).
	Backfill bool `json:"backfill"`
	// MaxDPH caps the fleet's $/hr (dph_total summed over live
	// instances); 0 = none.
	MaxDPH float64 `json:"max_dph"`
	// Budget caps what the launch spends ($), bandwidth included; 0 =
	// none, unless BudgetAuto. See CheckCaps.
	Budget float64 `json:"budget"`
	// BudgetAuto asks for DefaultBudget when Budget is 0 (the CLI sets it
	// unless --budget is given; --budget 0 turns the cap off).
	BudgetAuto bool `json:"budget_auto,omitempty"`
	// MaxRentals bounds the rentals the launch makes, replacements
	// included; 0 = DefaultMaxRentals(Count).
	MaxRentals int `json:"max_rentals,omitempty"`
	// ImageGB is the image's size, for the bandwidth estimate (each
	// rental pulls it at its offer's inet_down_cost) and the boot-time
	// estimate that ranks offers unable to pull it in time last; 0 =
	// guessed from the image's name.
	ImageGB float64 `json:"image_gb,omitempty"`
	// Create is the create body; Sessions are folded into its onstart.
	Create           provider.CreateRequest `json:"create"`
	Sessions         []Session              `json:"sessions,omitempty"`
	AllowSameMachine bool                   `json:"allow_same_machine"`
	BadHostTTL       time.Duration          `json:"bad_host_ttl"`
	// Workers bounds concurrent API calls; RentRate is rents per second of
	// the manager's clock.
	Workers  int     `json:"workers"`
	RentRate float64 `json:"rent_rate"`
	// CreateBatch is the most offers one create call rents, where the
	// marketplace takes bulk creates: offers that share a create body go
	// together. 0: provider.BulkChunk; 1: one offer a call.
	CreateBatch int `json:"create_batch,omitempty"`
	// PollEvery spaces the batched status listings (marketplace time).
	PollEvery time.Duration `json:"poll_every"`
	// WatchEvery spaces listings between them that only record what they
	// show, while an instance is on its way into running (booting, or
	// released): the store dates each boot and restart within the gap
	// between two listings, so cost's compute is within half of it. 0:
	// DefaultWatchEvery; PollEvery or more: none between. Where the
	// client paces its calls, the watch takes at most a quarter of them.
	WatchEvery time.Duration `json:"watch_every,omitempty"`
	// OnInterrupt is what Run does when its context is cancelled: keep
	// (default: leave everything for --resume), destroy-unready or
	// destroy-all. The CLI asks the user when the flag is not given.
	OnInterrupt string `json:"on_interrupt,omitempty"`
	// Bid rents interruptible instances (vast's create "price"); nil rents
	// on demand. It is stored with the spec, so --resume bids the same.
	Bid *Bid `json:"bid,omitempty"`
	// Accepted, when set, is what the user accepted for this launch (a
	// planner's announced option and the offers of its class): no other
	// offer is rented, and a rental of any but the announced offer, a
	// hedge or a replacement, is said and re-costed (EvSubstitute) before
	// it is sent.
	Accepted *Accepted `json:"accepted,omitempty"`

	// Hardware judges each node by what its boot probe measured against
	// what its offer advertised (hardware.go); nil: no judging (a launch
	// without the agent has no probe).
	Hardware *HardwarePolicy `json:"hardware,omitempty"`
	// Checks reach the nodes and the coordinator; supplied by the caller
	// on every run and resume, never stored.
	Checks Checks `json:"-"`
}

// Accepted is the offers a launch may rent, each with the estimated total
// the user was (or would be) quoted for running on it.
type Accepted struct {
	Offer int64 `json:"offer_id"` // the announced offer
	// Est is the estimated total ($) per accepted offer id, the announced
	// one's included.
	Est map[int64]float64 `json:"est"`
}

// Outbid modes (Bid.OnOutbid).
const (
	OutbidReplace = "replace"
	OutbidRebid   = "rebid"
)

// MinBidMargin is what --bid min bids above an offer's min_bid. min_bid
// moves as other renters bid: exactly min_bid loses every tie and is
// refused outright when min_bid rises between the search and the create;
// 5% absorbs that drift at a small fraction of the interruptible discount
// (min_bid is typically a third to three quarters of the on-demand price).
const MinBidMargin = 0.05

// Bid is an interruptible launch's bid.
type Bid struct {
	// Price is the bid in $/hr per machine (per rental, whatever its GPU
	// count), as vast's create "price" and `rent --bid` define it; 0 bids
	// each offer's min_bid plus MinBidMargin (--bid min). An offer whose
	// min_bid is above Price is not rented.
	Price float64 `json:"price,omitempty"`
	// OnOutbid is what the launch does with an instance a rival outbids:
	// replace (destroy it and rent the next offer; the default) or rebid
	// (raise its bid with change bid, up to the offer's on-demand price,
	// and replace it when that does not win it back).
	OnOutbid string `json:"on_outbid,omitempty"`
}

// ParseBid reads --bid: "min" or a price in $/hr per machine.
func ParseBid(s string) (Bid, error) {
	if strings.EqualFold(strings.TrimSpace(s), "min") {
		return Bid{}, nil
	}
	p, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(p > 0) || math.IsInf(p, 0) {
		return Bid{}, fmt.Errorf("--bid %q: want min (each offer's min_bid + %.0f%%) or a price in $/hr per machine, e.g. --bid 0.35", s, MinBidMargin*100)
	}
	return Bid{Price: p}, nil
}

// For is what the launch bids on offer o ($/hr per machine), and false
// when o's min_bid is above the fixed price (the create would be refused).
func (b Bid) For(o market.Offer) (float64, bool) {
	if b.Price > 0 {
		return b.Price, b.Price >= o.MinBid
	}
	if o.MinBid <= 0 {
		return 0, false
	}
	return math.Ceil(o.MinBid*(1+MinBidMargin)*1e4) / 1e4, true
}

// WithDefaults fills zero fields.
func (s Spec) WithDefaults() Spec {
	if s.MinReady <= 0 || s.MinReady > s.Count {
		s.MinReady = s.Count
	}
	if s.ImageGB <= 0 {
		s.ImageGB = plan.ImageGB(s.Create.Image)
	}
	if s.OnInterrupt == "" {
		s.OnInterrupt = InterruptKeep
	}
	if s.MaxRentals == 0 {
		s.MaxRentals = DefaultMaxRentals(s.Count)
	}
	if s.Bid != nil && s.Bid.OnOutbid == "" {
		b := *s.Bid
		b.OnOutbid = OutbidReplace
		s.Bid = &b
	}
	if s.Hardware != nil {
		h := s.Hardware.withDefaults()
		s.Hardware = &h
	}
	return s.timeDefaults().paceDefaults()
}

// timeDefaults fills the zero timeouts and the bad-host TTL.
func (s Spec) timeDefaults() Spec {
	if s.BootTimeout <= 0 {
		s.BootTimeout = DefaultBootTimeout
	}
	if s.ReleaseTimeout <= 0 {
		s.ReleaseTimeout = DefaultReleaseTimeout
	}
	if s.BadHostTTL <= 0 {
		s.BadHostTTL = DefaultBadHostTTL
	}
	return s
}

// paceDefaults fills the zero paces: workers, rents, batches, polls.
func (s Spec) paceDefaults() Spec {
	if s.Workers <= 0 {
		s.Workers = DefaultWorkers
	}
	if s.RentRate <= 0 {
		s.RentRate = DefaultRentRate
	}
	if s.CreateBatch <= 0 {
		s.CreateBatch = provider.BulkChunk
	}
	if s.PollEvery <= 0 {
		s.PollEvery = DefaultPollEvery
	}
	if s.WatchEvery <= 0 {
		s.WatchEvery = DefaultWatchEvery
	}
	return s
}

// DefaultMaxRentals bounds a launch of count: every slot may be rented
// twice, and a small fleet gets 10 replacements.
func DefaultMaxRentals(count int) int { return max(2*count, count+10) }

// Validate checks a spec (after WithDefaults); the first problem found
// is the error.
func (s Spec) Validate() error {
	for _, check := range []func() error{s.validateNames, s.validateSizes, s.validateLimits, s.validateOnInterrupt, s.validateBid, s.validateSessions} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateNames checks the fleet's name and the announced offer.
func (s Spec) validateNames() error {
	if err := fleet.ValidateFleetName(s.Fleet); err != nil {
		return err
	}
	if a := s.Accepted; a != nil {
		if _, ok := a.Est[a.Offer]; !ok {
			return fmt.Errorf("accepted offers: the announced offer %d has no estimate", a.Offer)
		}
	}
	return nil
}

// validateSizes checks the count, the spares and the caps.
func (s Spec) validateSizes() error {
	if s.Count < 1 || s.Count > MaxCount {
		return fmt.Errorf("count %d: must be 1 to %d", s.Count, MaxCount)
	}
	if s.Spare > 1 {
		return fmt.Errorf("spare share %.2f: must be 0 to 1", s.Spare)
	}
	if s.MaxDPH < 0 || s.Budget < 0 {
		return errors.New("--max-dph and --budget must not be negative")
	}
	if s.MaxRentals < s.Count {
		return fmt.Errorf("--max-rentals %d: must be at least --count %d", s.MaxRentals, s.Count)
	}
	return nil
}

// validateLimits checks the image size, the deadline and the batch.
func (s Spec) validateLimits() error {
	if s.ImageGB < 0 || math.IsNaN(s.ImageGB) || math.IsInf(s.ImageGB, 0) {
		return fmt.Errorf("--image-size %g: must be a size in GB, 0 or more", s.ImageGB)
	}
	if s.Deadline < 0 {
		return errors.New("--deadline must not be negative")
	}
	if s.CreateBatch > provider.BulkChunk {
		return fmt.Errorf("--create-batch %d: must be 1 to %d, the most one bulk create takes", s.CreateBatch, provider.BulkChunk)
	}
	return nil
}

// validateOnInterrupt checks the interrupt choice and that an image is
// given.
func (s Spec) validateOnInterrupt() error {
	switch s.OnInterrupt {
	case InterruptKeep, InterruptDestroyUnready, InterruptDestroyAll:
	default:
		return fmt.Errorf("--on-interrupt %q: want keep, destroy-unready or destroy-all", s.OnInterrupt)
	}
	if s.Create.Image == "" {
		return errors.New("an image is required (--image)")
	}
	return nil
}

// validateBid checks an interruptible launch's bid.
func (s Spec) validateBid() error {
	b := s.Bid
	if b == nil {
		return nil
	}
	// vast's create accepts a price of 0.001 to 128 $/h.
	if b.Price < 0 || b.Price > 128 || math.IsNaN(b.Price) || b.Price > 0 && b.Price < 0.001 {
		return fmt.Errorf("--bid %g: must be min or a price of 0.001 to 128 $/hr per machine", b.Price)
	}
	switch b.OnOutbid {
	case OutbidReplace, OutbidRebid:
	default:
		return fmt.Errorf("--on-outbid %q: want replace or rebid", b.OnOutbid)
	}
	if s.Create.Price != nil {
		return errors.New("a bid launch sets each create's price itself: leave Create.Price nil")
	}
	return nil
}

// validateSessions checks the sessions' names and commands.
func (s Spec) validateSessions() error {
	seen := map[string]bool{}
	for _, se := range s.Sessions {
		if !wire.ValidSessionName(se.Name) || seen[se.Name] {
			return fmt.Errorf("session %q: names must be unique, %s", se.Name, wire.SessionNameRule)
		}
		seen[se.Name] = true
		if strings.TrimSpace(se.Command) == "" {
			return fmt.Errorf("session %q has no command", se.Name)
		}
	}
	return nil
}

// stored is the fleet row's spec JSON.
type stored struct {
	Version    int             `json:"version"`
	Spec       Spec            `json:"spec"`
	Candidates []market.Ranked `json:"candidates"`
	// Secrets says that Spec's env values, onstart and session commands
	// are redacted and kept in the store's secret file for the fleet.
	Secrets bool `json:"secrets,omitempty"`
	// StartedAt and DeadlineAt are the launch's window in marketplace
	// time: a resume keeps them, so a crash or a pause never buys a
	// launch a fresh deadline. DeadlineAt is zero without a deadline.
	// Rows written before they existed fall back to the fleet's
	// creation time.
	StartedAt  time.Time `json:"started_at,omitzero"`
	DeadlineAt time.Time `json:"deadline_at,omitzero"`
}

// window is when a launch started and when its deadline falls (zero: none).
type window struct{ start, deadline time.Time }

func newWindow(start time.Time, deadline time.Duration) window {
	w := window{start: start}
	if deadline > 0 {
		w.deadline = start.Add(deadline)
	}
	return w
}

// Redacted stands in for a secret in what is stored or shown.
const Redacted = "<redacted>"

// secrets is what a launch needs to resume but keeps out of the database:
// env values and scripts carry tokens.
type secrets struct {
	Env      map[string]string `json:"env,omitempty"`
	Onstart  string            `json:"onstart,omitempty"`
	Sessions []Session         `json:"sessions,omitempty"`
}

// splitSecrets returns spec with its env values, onstart and session
// commands redacted, and what was taken out; ok is false when there was
// nothing to take.
func splitSecrets(spec Spec) (public Spec, sec secrets, ok bool) {
	public = spec
	if len(spec.Create.Env) > 0 {
		public.Create.Env = make(map[string]string, len(spec.Create.Env))
		for k := range spec.Create.Env {
			public.Create.Env[k] = Redacted
		}
		sec.Env, ok = spec.Create.Env, true
	}
	if spec.Create.Onstart != "" {
		public.Create.Onstart = Redacted
		sec.Onstart, ok = spec.Create.Onstart, true
	}
	if len(spec.Sessions) > 0 {
		public.Sessions = make([]Session, len(spec.Sessions))
		for i, ss := range spec.Sessions {
			public.Sessions[i] = Session{Name: ss.Name, Command: Redacted}
		}
		sec.Sessions, ok = spec.Sessions, true
	}
	return public, sec, ok
}

// joinSecrets puts what splitSecrets took back into spec.
func joinSecrets(spec Spec, sec secrets) Spec {
	if sec.Env != nil {
		spec.Create.Env = sec.Env
	}
	spec.Create.Onstart = sec.Onstart
	if sec.Sessions != nil {
		spec.Sessions = sec.Sessions
	}
	return spec
}

// secretName is the store secret that holds a fleet's launch secrets.
func secretName(fleetName string) string { return "launch-" + fleetName }

// encodeStored returns the fleet row's spec JSON with secrets redacted, and
// the secrets to keep apart (nil when there are none).
func encodeStored(spec Spec, cands []market.Ranked, w window) (raw json.RawMessage, secret []byte, err error) {
	public, sec, ok := splitSecrets(spec)
	if ok {
		if secret, err = json.Marshal(sec); err != nil {
			return nil, nil, err
		}
	}
	raw, err = json.Marshal(stored{Version: 1, Spec: public, Candidates: cands, Secrets: ok,
		StartedAt: w.start.UTC(), DeadlineAt: w.deadline.UTC()})
	return raw, secret, err
}

// decodeStored reads a fleet row's spec JSON; loadSecret is called when the
// spec's secrets were kept apart.
func decodeStored(raw json.RawMessage, loadSecret func() ([]byte, error)) (stored, error) {
	var st stored
	if err := json.Unmarshal(raw, &st); err != nil {
		return stored{}, fmt.Errorf("fleet spec: %w", err)
	}
	if st.Version != 1 || st.Spec.Count == 0 {
		return stored{}, errors.New("fleet spec: not a launch spec (was the fleet made by `launch`?)")
	}
	if st.Secrets {
		b, err := loadSecret()
		if err != nil {
			return stored{}, fmt.Errorf("fleet spec: its env and onstart were kept apart and cannot be read: %w", err)
		}
		var sec secrets
		if err := json.Unmarshal(b, &sec); err != nil {
			return stored{}, fmt.Errorf("fleet spec: its env and onstart file: %w", err)
		}
		st.Spec = joinSecrets(st.Spec, sec)
	}
	return st, nil
}

// window is the stored launch's start and deadline; created is the fleet
// row's creation time, the start of a launch stored without them.
func (st stored) window(created time.Time) window {
	if st.StartedAt.IsZero() {
		return newWindow(created, st.Spec.Deadline)
	}
	return window{start: st.StartedAt, deadline: st.DeadlineAt}
}

// ParseEnv reads --env in either of two forms, which may be mixed across
// ';'-separated parts:
//   - the official CLI's Docker flags, `-e K=V -p 8000:8000 -p 9000:9000/udp`,
//     read as its parse_env does (see dockerEnv);
//   - vastfleet's 'KEY=V;KEY2=V2', where empty values are kept and a later
//     key overrides an earlier one.
//
// vast opens a port only for a "-p H:C" key in the env dict, so TCP_PORTS
// and UDP_PORTS (comma or space separated port numbers) add those keys too.
func ParseEnv(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if strings.HasPrefix(part, "-") {
			dockerEnv(part, out)
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("--env %q: want KEY=VALUE pairs separated by ';', or Docker flags (-e KEY=VALUE -p 8000:8000)", part)
		}
		out[k] = v
	}
	for k, proto := range map[string]string{"TCP_PORTS": "", "UDP_PORTS": "/udp"} {
		for _, p := range strings.FieldsFunc(out[k], func(r rune) bool { return r == ',' || r == ' ' }) {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("--env %s=%s: %q is not a port number (1-65535)", k, out[k], p)
			}
			out["-p "+p+":"+p+proto] = "1"
		}
	}
	return out, nil
}

// dockerEnv reads Docker flags as the vastai CLI's parse_env does: tokens
// split on spaces outside quotes; -e K=V gives K: V (quotes around V
// removed, '=' allowed in V); -p H:C[/udp] gives "-p H:C": "1" when it holds
// only 0-9 : t c p / u d; -v a:b gives "-v a:b": "1"; -n name gives
// "-n name": "1"; -h host gives "-h": host; anything else is dropped.
func dockerEnv(s string, out map[string]string) {
	prev := ""
	for _, e := range envTokens(s) {
		if prev == "" {
			switch e {
			case "-e", "-p", "-h", "-v", "-n":
				prev = e
			}
			continue
		}
		envOption(prev, e, out)
		prev = ""
	}
}

// envTokens splits s at spaces outside quotes, keeping the quotes.
func envTokens(s string) []string {
	var tokens []string
	var cur strings.Builder
	var inD, inS bool
	for _, c := range s {
		switch {
		case c == ' ' && !inD && !inS:
			tokens = append(tokens, cur.String())
			cur.Reset()
			continue
		case c == '\'':
			inS = !inS
		case c == '"':
			inD = !inD
		}
		cur.WriteRune(c)
	}
	return append(tokens, cur.String())
}

// envOption records one docker option (flag, its value e) in out; a port,
// volume or network value with characters it cannot hold is dropped.
func envOption(flag, e string, out map[string]string) {
	only := func(s, set string) bool {
		return strings.Trim(s, set) == ""
	}
	switch flag {
	case "-p":
		if only(e, "0123456789:tcp/udp") {
			out["-p "+e] = "1"
		}
	case "-e":
		if k, v, ok := strings.Cut(e, "="); ok {
			out[k] = strings.Trim(v, `'"`)
		}
	case "-v":
		if only(e, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:./_") {
			out["-v "+e] = "1"
		}
	case "-n":
		if only(e, "abcdefghijklmnopqrstuvwxyz0123456789-") {
			out["-n "+e] = "1"
		}
	default:
		out[flag] = e
	}
}

// ParseSession reads --session name:command.
func ParseSession(s string) (Session, error) {
	name, cmd, ok := strings.Cut(s, ":")
	if !ok || !wire.ValidSessionName(name) || strings.TrimSpace(cmd) == "" {
		return Session{}, fmt.Errorf("--session %q: want name:command (name of %s)", s, wire.SessionNameRule)
	}
	return Session{Name: name, Command: cmd}, nil
}

// Onstart is the onstart script with the sessions appended: each session
// runs detached under its name (tmux when present, otherwise nohup with a
// log in /var/log/vastfleet-<name>.log), so that it outlives the onstart
// shell. It is idempotent: a session line already in onstart is not added
// again (the CLI may have folded the sessions in before Run does).
func Onstart(onstart string, sessions []Session) string {
	var b strings.Builder
	b.WriteString(onstart)
	for _, se := range sessions {
		line := sessionLine(se)
		if strings.Contains(onstart, line) {
			continue
		}
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
		b.WriteString(line)
	}
	return b.String()
}

func sessionLine(se Session) string {
	q := shell.Quote(se.Command)
	return fmt.Sprintf("if command -v tmux >/dev/null 2>&1; then tmux new-session -d -s %s %s; else nohup sh -c %s >/var/log/vastfleet-%s.log 2>&1 & fi\n",
		se.Name, shell.Quote("sh -c "+q), q, se.Name)
}
