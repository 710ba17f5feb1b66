// Package sim is a simulated vast.ai marketplace: an HTTP server that speaks
// the endpoints vastfleet's real client uses (vast-api.md §2, §5–§7, §10,
// §15, §17) and the official CLI's billing history, launch, recycle, update
// and template routes, with a seeded offer population, a virtual clock,
// per-second billing and injectable faults. It is written from vast's
// documented behaviour and shares no code with the client (its offers,
// query evaluator, ledger rules and boot model are its own), so that tests
// comparing the two compare two implementations. Everything is computed lazily from the
// clock whenever state is observed, so a manual clock makes every timeline
// exact. With Config.HostDir a machine (package host) runs behind every
// running instance; the machines follow the market's state, and a served
// market watches its clock in one goroutine so that they boot even when no
// request looks.
//
// Choices where the real marketplace is unknown or was simplified:
//   - A search without a limit returns DefaultResultCap offers (hard cap
//     MaxResultCap); the real default is undocumented.
//   - loading bills storage but not compute; running and rebooting bill
//     both; offline bills nothing; stopped and exited bill storage.
//   - An offer is rented by one instance at a time. Stopping gives the GPU
//     up (the offer is rentable again); a later start finds it taken when
//     someone holds it, when it churned, or by Faults.TakenWhileStopped,
//     and then waits in "Scheduling" until the GPU frees up: when one of
//     this account's instances holds it, until that one stops or goes;
//     when another renter does, for that rental's drawn length
//     (rivalHold: 30 minutes to 12 hours). Then it loads as any start.
//   - The v1 listing always pages in id order (order_by is validated, not
//     applied); select_filters work on id, label, actual_status,
//     intended_status, gpu_name and verification.
//   - A bid (price set at create) bills the bid. Rival bids are drawn per
//     offer and half hour (bids.go): one above the bid stops the instance
//     (intended_status stays running), and it resumes by itself at the
//     start of the first half hour whose rival bids no more than it, or
//     when change bid raises it above the rival. Among the account's own
//     instances on one machine, on-demand beats interruptible and a higher
//     bid beats a lower one: a create that outbids stops the holder, which
//     resumes when the taker lets go (highest bid first) or outbids it; an
//     equal or lower bid is refused with the price to beat. Listed min_bid
//     moves with demand: in a window with a rival it is just above the
//     rival's bid, and a create below it is refused (listedMinBid). The
//     account's own bids do not raise it: a held offer is not rentable.
package sim

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/sim/host"
)

// Defaults and assumptions of the simulator.
const (
	// DefaultResultCap caps a search without a limit. The real server's
	// default is unknown (vast-api.md §10); 64 is the simulator's choice.
	DefaultResultCap = 64
	// MaxResultCap is the hard cap on any search.
	MaxResultCap = 1000
	// DefaultBalance is the starting account credit in dollars.
	DefaultBalance = 1000.0
	// DefaultImageGB is the size of an image the simulator knows nothing about.
	DefaultImageGB = 6.0
	// MaxLabel is the create-time label limit; relabeling allows MaxRelabel.
	MaxLabel   = 256
	MaxRelabel = 1024
)

// Config configures a Market.
type Config struct {
	Seed   int64
	Offers int // offer population size; 0 means DefaultOffers
	// Clock is the market's time. When nil, the market runs a
	// clock.Scaled at TimeScale (default 1) over wall time.
	Clock clock.Clock
	// TimeScale is simulated seconds per wall second when Clock is nil.
	TimeScale float64
	// APIKey is the only key accepted; empty accepts any request.
	APIKey string
	Faults Faults
	// Balance is the starting credit; 0 means DefaultBalance.
	Balance float64
	// ResultCap caps searches without a limit; 0 means DefaultResultCap.
	ResultCap int
	// AnswerCap, when > 0, caps every search answer at that many offers,
	// whatever limit the request asks, as a server or proxy that cuts
	// answers short would.
	AnswerCap int
	// MaxLogs bounds the stored log snapshots; 0 means 256.
	MaxLogs int
	// ImageSizes maps an image name (exact, or without its tag) to GB.
	ImageSizes map[string]float64
	// HostDir, when set, puts a machine behind every instance (package
	// host): a directory under HostDir, onstart run on every boot, SSH on
	// loopback. Empty: instances are rows only, and nothing answers on
	// their (still loopback) addresses.
	HostDir string
	// Links paces each machine's SSH traffic at its offer's inet_down and
	// inet_up (host.Link); false leaves loopback at full speed.
	Links bool
	// CapacityScale > 0 runs each machine's workload at its true cores
	// over this scale: simulated cores to one of this computer's
	// (host.Hardware.Scale); 0: every machine shares this computer's
	// cores alike.
	CapacityScale float64
	// Log receives the simulator's own warnings; nil discards them.
	Log *slog.Logger
	// IDBase fixes the offset of instance ids; 0 draws one at random.
	IDBase int64
	// Stop, when set, is served as POST /sim/stop (loopback only): how
	// `vastfleet sim stop` ends the local market's process.
	Stop func()
}

// LedgerEntry is one charge. Adjacent charges of one kind for one instance
// are merged, so a run, a stop and a start give separate entries.
type LedgerEntry struct {
	InstanceID int64     `json:"instance_id"`
	OfferID    int64     `json:"offer_id"`
	Kind       string    `json:"kind"` // compute, storage, bandwidth
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
	Amount     float64   `json:"amount"`
}

// fate is the key of the instance's draws (Seq for states saved before
// fates were keyed by offer).
func (in *instance) fate() int64 {
	if in.Fate != 0 {
		return in.Fate
	}
	return in.Seq
}

// rentals counts the instances ever created on an offer.
func (m *Market) rentals(offerID int64) int {
	n := 0
	for _, in := range m.st.Instances {
		if in.OfferID == offerID {
			n++
		}
	}
	return n
}

// event is one line of an instance's log.
type event struct {
	At  time.Time `json:"at"`
	Msg string    `json:"msg"`
}

// instance is the simulator's record of a rental, destroyed ones included.
type instance struct {
	ID int64 `json:"id"`
	// Seq keys the instance's random draws: the market's own sequence,
	// the same for the same seed, while ID adds the market's IDBase.
	Seq int64 `json:"seq,omitempty"`
	// Fate keys what happens to the instance (faults, boot time): the
	// offer and how many rentals of it came before, so that the same
	// spec meets the same fates whatever order concurrent rents land in.
	Fate    int64             `json:"fate,omitempty"`
	OfferID int64             `json:"offer_id"`
	Label   *string           `json:"label"`
	Image   string            `json:"image"`
	Runtype string            `json:"runtype"`
	Onstart string            `json:"onstart,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Disk    float64           `json:"disk"`
	Bid     bool              `json:"bid"`
	ImageGB float64           `json:"image_gb"`
	// ComputeRate is $/h while running; StorageRate $/h while it exists
	// and its host is online.
	ComputeRate float64 `json:"compute_rate"`
	StorageRate float64 `json:"storage_rate"`
	APIKey      string  `json:"api_key"`

	CreatedAt  time.Time `json:"created_at"`
	Status     string    `json:"status"` // "" (null), loading, running, rebooting, stopped, exited, offline
	Intended   string    `json:"intended"`
	StatusMsg  string    `json:"status_msg"`
	LoadingAt  time.Time `json:"loading_at"` // null → loading
	ReadyAt    time.Time `json:"ready_at"`   // loading → running; zero: never
	OfflineAt  time.Time `json:"offline_at"` // running → offline; zero: never
	Fault      string    `json:"fault,omitempty"`
	OfflineSet bool      `json:"offline_set,omitempty"` // the host failure was scheduled (once per instance)
	Scheduling bool      `json:"scheduling,omitempty"`
	// FreeAt is when another renter's hold on a Scheduling instance's GPU
	// ends; zero while this account's own instances hold it.
	FreeAt time.Time `json:"free_at,omitzero"`
	Taken  bool      `json:"taken,omitempty"` // another renter took the GPU while it was stopped
	// OutbidAt is when a rival bid stops this interruptible instance;
	// Outbid says one did.
	OutbidAt time.Time `json:"outbid_at,omitempty"`
	Outbid   bool      `json:"outbid,omitempty"`
	// TakenBy is the account's own instance whose higher bid, or
	// on-demand rental, took this one's machine: it resumes when that one
	// lets go (wakeScheduled).
	TakenBy int64 `json:"taken_by,omitempty"`
	// RegainAt is when an outbid instance gets its machine back (no rival
	// above its bid any more) and starts again; zero: not within the
	// horizon.
	RegainAt    time.Time `json:"regain_at,omitempty"`
	StoppedAt   time.Time `json:"stopped_at"`
	Starts      int64     `json:"starts"`
	Destroyed   bool      `json:"destroyed"`
	DestroyedAt time.Time `json:"destroyed_at"`
	Events      []event   `json:"events"`
	// The image pull: PullCost dollars of download spread evenly over
	// [PullFrom, PullTo).
	PullFrom time.Time `json:"pull_from"`
	PullTo   time.Time `json:"pull_to"`
	PullCost float64   `json:"pull_cost"`

	// Keys are the SSH keys the instance accepts: the account's when it
	// was created, and those attached since.
	Keys []sshKey `json:"keys,omitempty"`
	// Loopback ports: the proxy route (ssh_port), the direct route
	// (ports["22/tcp"]) for direct runtypes, and each -p port.
	SSHPort    int            `json:"ssh_port,omitempty"`
	DirectPort int            `json:"direct_port,omitempty"`
	TCPPorts   map[string]int `json:"tcp_ports,omitempty"`
	RunningAt  time.Time      `json:"running_at"`
	// Last-mile faults, drawn at create: keys refused for SSHLate after
	// running, handshakes that hang, connections dropped after SSHDrop
	// bytes, an onstart that fails, and a dark port that hangs rather than
	// refuses while offline.
	SSHLate     time.Duration `json:"ssh_late,omitempty"`
	SSHHang     bool          `json:"ssh_hang,omitempty"`
	SSHDrop     int64         `json:"ssh_drop,omitempty"`
	OnstartFail bool          `json:"onstart_fail,omitempty"`
	DarkHang    bool          `json:"dark_hang,omitempty"`
	HostGone    bool          `json:"host_gone,omitempty"` // its directory was removed
}

// Market is one simulated marketplace. All methods are safe for concurrent
// use; HTTP requests are served one at a time.
type Market struct {
	mu  sync.Mutex
	cfg Config
	// lastRequest is the wall time (UnixNano) of the newest request: the
	// local market ends after a quiet while (Idle).
	lastRequest atomic.Int64
	offers      []Offer
	index       searchIndex // offer searches, see index.go
	byID        map[int64]int
	st          *state
	lastLE      map[[2]int64]int // (instance, kind) → index of its latest ledger entry
	// riskNorm is the offers' mean machineRiskBase.
	riskNorm float64

	dir  string
	lock *os.File
	jr   journal // see journal.go

	log      *slog.Logger
	hosts    *host.Manager
	booted   map[int64]int64 // running machines → the instance's Starts at boot
	keysOpen map[int64]bool  // running machines that accept their keys
	apiURL   string          // where the market is served, for VAST_URL
	keyOwner map[string]int64
	buckets  map[string]*bucket // per API key, for Faults.RateLimit
	// endpoints: per API key and route, for Faults.EndpointLimits
	endpoints map[[2]string]*endpointBucket
	liars     liars // lying hosts' operators (liar.go)
}

// state is everything a Market persists; offers are regenerated from Seed.
type state struct {
	Version  int       `json:"version"`
	Seed     int64     `json:"seed"`
	Offers   int       `json:"offers"`
	SimTime  time.Time `json:"sim_time"`
	WallTime time.Time `json:"wall_time"`
	Balance  float64   `json:"balance"`
	NextID   int64     `json:"next_id"` // the next Seq
	// IDBase is added to every instance's Seq to give its id: drawn once
	// per market and saved with it, so that two markets (two data dirs,
	// two test runs) never hand out the same ids.
	IDBase    int64             `json:"id_base,omitempty"`
	BilledTo  time.Time         `json:"billed_to"`
	Requests  int64             `json:"requests"`
	Instances []*instance       `json:"instances"`
	Ledger    []LedgerEntry     `json:"ledger"`
	Logs      map[string]string `json:"logs"`
	LogOrder  []string          `json:"log_order"`
	Creates   map[int64]int     `json:"creates_per_offer"`
	SSHKeys   []sshKey          `json:"ssh_keys,omitempty"`
	NextKeyID int64             `json:"next_key_id,omitempty"`
	// APIKeys are the account's extra API keys (apikeys.go).
	APIKeys      []apiKey `json:"api_keys,omitempty"`
	NextAPIKeyID int64    `json:"next_api_key_id,omitempty"`
	// Gen counts the market's snapshots; its journal names the one it
	// follows (journal.go).
	Gen int64 `json:"gen,omitempty"`
	// OpenedAt is when the account was opened (its opening credit's
	// date in the invoices); zero in states saved before it was kept.
	OpenedAt time.Time `json:"opened_at,omitzero"`
}

// New builds an in-memory market.
func New(cfg Config) (*Market, error) { return newMarket(cfg, nil) }

// newMarket builds a market, from saved state when given.
func newMarket(cfg Config, saved *state) (*Market, error) {
	if cfg.Clock == nil {
		cfg.Clock = defaultClock(cfg)
	}
	if cfg.Offers <= 0 {
		cfg.Offers = DefaultOffers
	}
	if cfg.Balance == 0 {
		cfg.Balance = DefaultBalance
	}
	if cfg.ResultCap <= 0 {
		cfg.ResultCap = DefaultResultCap
	}
	cfg.ResultCap = min(cfg.ResultCap, MaxResultCap)
	if cfg.MaxLogs <= 0 {
		cfg.MaxLogs = 256
	}
	now := cfg.Clock.Now()
	m := &Market{cfg: cfg, log: cfg.Log, booted: map[int64]int64{}, keysOpen: map[int64]bool{}}
	m.lastRequest.Store(time.Now().UnixNano())
	if m.log == nil {
		m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.HostDir != "" {
		h, err := host.New(cfg.HostDir, m.log)
		if err != nil {
			return nil, fmt.Errorf("sim: instance hosts: %w", err)
		}
		m.hosts = h
	}
	m.st = &state{
		Version: 1, Seed: cfg.Seed, Offers: cfg.Offers, SimTime: now, Balance: cfg.Balance,
		NextID: 1000 + int64(draw(cfg.Seed, drawKey, 0, 0)*9000), BilledTo: now, OpenedAt: now,
		Logs: map[string]string{}, Creates: map[int64]int{}, IDBase: cfg.IDBase,
	}
	if m.st.IDBase == 0 {
		m.st.IDBase = randomIDBase()
	}
	if saved != nil {
		if saved.Logs == nil {
			saved.Logs = map[string]string{}
		}
		if saved.Creates == nil {
			saved.Creates = map[int64]int{}
		}
		m.st = saved
	}
	m.loadOffers()
	for _, in := range m.st.Instances {
		if in.Seq == 0 { // saved before ids had a base
			in.Seq = in.ID
		}
		if !in.Destroyed && in.SSHPort == 0 { // saved before instances had ports
			m.assignPorts(in)
		}
	}
	return m, nil
}

func (m *Market) loadOffers() {
	m.offers = GenerateOffers(m.st.Seed, m.st.Offers)
	m.riskNorm = meanRiskBase(m.offers)
	m.byID = make(map[int64]int, len(m.offers))
	for i, o := range m.offers {
		m.byID[o.ID] = i
	}
	m.lastLE = map[[2]int64]int{}
	for i, e := range m.st.Ledger {
		m.lastLE[[2]int64{e.InstanceID, kindCode(e.Kind)}] = i
	}
	m.keyOwner = map[string]int64{}
	for _, in := range m.st.Instances {
		m.keyOwner[in.APIKey] = in.ID
	}
}

func kindCode(k string) int64 {
	switch k {
	case "compute":
		return 1
	case "storage":
		return 2
	}
	return 3
}

// defaultClock is the clock of a market given none: scaled wall time,
// the one place wall time enters the simulator.
func defaultClock(cfg Config) clock.Clock {
	w := clock.Wall{}.Now()
	return clock.NewScaled(w, w, cfg.TimeScale, clock.Wall{})
}

// Clock is the market's clock.
func (m *Market) Clock() clock.Clock { return m.cfg.Clock }

// Offers returns the generated offer population (as generated, before
// availability); the slice is a copy.
func (m *Market) Offers() []Offer {
	return append([]Offer(nil), m.offers...)
}

// ListedOffers is the market's offers as a search lists them now: min_bid
// is the current minimum bid, not the machine's floor.
func (m *Market) ListedOffers() []Offer {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	out := append([]Offer(nil), m.offers...)
	for i := range out {
		out[i].MinBid = m.listedMinBid(&m.offers[i], now)
	}
	return out
}

// ---- lifecycle ----

// nextEvent is when the instance next changes state by itself; zero: never.
func (in *instance) nextEvent() time.Time {
	if in.Destroyed {
		return time.Time{}
	}
	var next time.Time
	switch in.Status {
	case "":
		next = in.LoadingAt
	case "loading", "rebooting":
		next = in.ReadyAt
	case "running":
		next = in.OfflineAt
	case "stopped":
		if in.Outbid && in.Intended == "running" {
			return in.RegainAt
		}
		if in.Scheduling {
			return in.FreeAt
		}
		return time.Time{}
	default:
		return time.Time{}
	}
	if !in.OutbidAt.IsZero() && (next.IsZero() || in.OutbidAt.Before(next)) {
		next = in.OutbidAt
	}
	return next
}

func (in *instance) log(t time.Time, format string, args ...any) {
	in.Events = append(in.Events, event{At: t, Msg: fmt.Sprintf(format, args...)})
}

// step applies the instance's due event at t.
func (in *instance) step(t time.Time) {
	if !in.OutbidAt.IsZero() && !in.OutbidAt.After(t) {
		in.outbid(t)
		return
	}
	switch in.Status {
	case "":
		in.Status = "loading"
		in.StatusMsg = "Pulling image " + in.Image
		in.log(t, "pulling %s (%.1f GB)", in.Image, in.ImageGB)
	case "loading", "rebooting":
		in.ReadyAt = time.Time{}
		if in.Fault == "bootfail" {
			in.Status = "exited"
			in.StatusMsg = "Error response from daemon: failed to create task for container: OCI runtime create failed: exit status 1"
			in.log(t, "container exited during startup (exit status 1)")
			return
		}
		in.Status = "running"
		in.RunningAt = t
		in.StatusMsg = "success, running " + in.Image + "/ssh"
		in.log(t, "container started")
	case "running":
		in.OfflineAt = time.Time{}
		in.Status = "offline"
		in.StatusMsg = "host offline: no heartbeat from machine"
		in.log(t, "host lost contact with vast")
	}
}

func (in *instance) rates() (compute, storage float64) {
	if in.Destroyed {
		return 0, 0
	}
	// Loading does not bill compute: one vast page says so, and billing
	// it would only make leaks look worse than the docs promise.
	c, s := billsIn(in.Status)
	if c {
		compute = in.ComputeRate
	}
	if s {
		storage = in.StorageRate
	}
	return compute, storage
}

// advance brings every instance and the ledger up to now.
func (m *Market) advance(now time.Time) {
	for m.st.BilledTo.Before(now) {
		t := m.st.BilledTo
		next := now
		for _, in := range m.st.Instances {
			if e := in.nextEvent(); !e.IsZero() && e.Before(next) {
				next = e
			}
		}
		if next.Before(t) {
			next = t
		}
		rate := 0.0
		for _, in := range m.st.Instances {
			c, s := in.rates()
			rate += c + s
		}
		// Stop at the instant the balance reaches zero (compared in hours
		// first, so a tiny rate cannot overflow a Duration).
		if rate > 0 && m.st.Balance > 0 && m.st.Balance/rate < next.Sub(t).Hours() {
			next = t.Add(time.Duration(math.Ceil(m.st.Balance / rate * float64(time.Hour))))
		}
		if next.After(t) {
			m.bill(t, next)
		}
		m.st.BilledTo = next
		for _, in := range m.st.Instances {
			for e := in.nextEvent(); !e.IsZero() && !e.After(next); e = in.nextEvent() {
				if in.Outbid && in.Status == "stopped" {
					m.regain(in, e) // an outbid instance's only event
					continue
				}
				if in.Scheduling && in.Status == "stopped" {
					m.schedule(in, e) // the rival's hold ended
					continue
				}
				in.step(e)
				if in.Outbid {
					in.RegainAt = m.regainAt(in.OfferID, in.ComputeRate, e)
				}
				if in.Status == "running" && in.Fault == "offline" && !in.OfflineSet {
					in.OfflineSet = true
					in.OfflineAt = e.Add(10*time.Minute + time.Duration(draw(m.st.Seed, drawOfflineAfter, in.fate(), in.Starts)*float64(5*time.Hour)))
				}
			}
		}
		if m.st.Balance <= 1e-9 {
			for _, in := range m.st.Instances {
				if c, _ := in.rates(); c > 0 || (!in.Destroyed && (in.Status == "" || in.Status == "loading")) {
					m.stop(in, next, "stopped: account balance exhausted")
				}
			}
		}
	}
}

func (m *Market) bill(from, to time.Time) {
	h := to.Sub(from).Hours()
	for _, in := range m.st.Instances {
		c, s := in.rates()
		if c > 0 {
			m.charge(in, "compute", from, to, c*h)
		}
		if s > 0 {
			m.charge(in, "storage", from, to, s*h)
		}
		if amt := in.pulled(from, to); amt > 0 {
			m.charge(in, "bandwidth", from, to, amt)
		}
	}
}

// pulled is the download charge for the part of the image pull that falls
// in [from, to).
func (in *instance) pulled(from, to time.Time) float64 {
	if in.Destroyed || in.PullCost <= 0 {
		return 0
	}
	return in.PullCost * in.pullShare(from, to)
}

// pullShare is the share of the image that arrives in [from, to): the
// pull runs at a steady rate from PullFrom to PullTo.
func (in *instance) pullShare(from, to time.Time) float64 {
	if !in.PullTo.After(in.PullFrom) {
		return 0
	}
	a, b := from, to
	if in.PullFrom.After(a) {
		a = in.PullFrom
	}
	if in.PullTo.Before(b) {
		b = in.PullTo
	}
	if !b.After(a) {
		return 0
	}
	return float64(b.Sub(a)) / float64(in.PullTo.Sub(in.PullFrom))
}

// kbPerGB is the unit of the inet_*_billed counters vast reports (KB).
const kbPerGB = 1e6

// downloadedKB is the inet_down_billed counter at now: the image bytes
// that arrived so far (and were billed, as the ledger bills them).
func (in *instance) downloadedKB(now time.Time) float64 {
	if in.PullCost <= 0 {
		return 0
	}
	return in.ImageGB * in.pullShare(in.PullFrom, now) * kbPerGB
}

func (m *Market) charge(in *instance, kind string, from, to time.Time, amount float64) {
	m.st.Balance -= amount
	key := [2]int64{in.ID, kindCode(kind)}
	if i, ok := m.lastLE[key]; ok && m.st.Ledger[i].To.Equal(from) {
		m.st.Ledger[i].To = to
		m.st.Ledger[i].Amount += amount
		return
	}
	m.st.Ledger = append(m.st.Ledger, LedgerEntry{InstanceID: in.ID, OfferID: in.OfferID, Kind: kind, From: from, To: to, Amount: amount})
	m.lastLE[key] = len(m.st.Ledger) - 1
}

func (m *Market) stop(in *instance, now time.Time, msg string) {
	in.Status = "stopped"
	in.Intended = "stopped"
	in.Scheduling, in.Outbid = false, false
	in.ReadyAt, in.LoadingAt, in.OfflineAt, in.OutbidAt, in.RegainAt, in.FreeAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	in.StoppedAt = now
	in.StatusMsg = msg
	in.log(now, "%s", msg)
}

// holders maps each offer held by a live, non-stopped instance to it.
func (m *Market) holders() map[int64]*instance {
	h := map[int64]*instance{}
	for _, in := range m.st.Instances {
		if !in.Destroyed && in.Status != "stopped" {
			h[in.OfferID] = in
		}
	}
	return h
}

// gpusInUse maps each machine to the GPUs its live, non-stopped instances
// hold, whichever of the machine's offers they rented.
func (m *Market) gpusInUse() map[int64]int {
	used := map[int64]int{}
	for _, in := range m.st.Instances {
		if !in.Destroyed && in.Status != "stopped" {
			o := &m.offers[m.byID[in.OfferID]]
			used[o.MachineID] += o.NumGPUs
		}
	}
	return used
}

// crowded reports whether o's machine has fewer GPUs free than o needs:
// renting a slice of a machine hides the siblings that no longer fit.
func crowded(o *Offer, used map[int64]int) bool {
	return used[o.MachineID]+o.NumGPUs > MachineGPUs(o)
}

// churned reports whether another renter holds the offer now. Each offer
// has its own rhythm: rentals by others of 20–120 minutes, starting at its
// own phase, so offers come and go all the time rather than all at once on
// the hour.
func (m *Market) churned(offerID int64, now time.Time) bool {
	p := m.cfg.Faults.OfferChurnPerHour
	return p > 0 && draw(m.st.Seed, drawChurn, offerID, m.offerSpell(offerID, now)) < p
}

// offerSpell numbers the offer's current spell: the stretch of time over
// which who else holds it stays the same.
func (m *Market) offerSpell(offerID int64, now time.Time) int64 {
	period := int64(1200 + 6000*draw(m.st.Seed, drawSpell, offerID, 0))
	phase := int64(float64(period) * draw(m.st.Seed, drawSpell, offerID, 1))
	return (now.Unix() + phase) / period
}

func (m *Market) imageGB(image string) float64 {
	if gb, ok := m.cfg.ImageSizes[image]; ok {
		return gb
	}
	base := image
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		base = base[:i]
	}
	if gb, ok := m.cfg.ImageSizes[base]; ok {
		return gb
	}
	l := strings.ToLower(image)
	switch {
	case strings.Contains(l, "pytorch"), strings.Contains(l, "torch"):
		return 8
	case strings.Contains(l, "tensorflow"):
		return 7
	case strings.Contains(l, "alpine"):
		return 0.1
	case strings.Contains(l, "ubuntu"), strings.Contains(l, "debian"):
		return 0.3
	}
	return DefaultImageGB
}

// createInput is a validated create request.
type createInput struct {
	Image   string
	Disk    float64
	Env     map[string]string
	Onstart string
	Runtype string
	Label   *string
	Price   *float64
}

// apiError is an HTTP error answer with vast's body shape.
type apiError struct {
	Status int
	Code   string
	Msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Msg) }

func (m *Market) create(offerID int64, in createInput, now time.Time) (*instance, error) {
	idx, ok := m.byID[offerID]
	if !ok {
		return nil, &apiError{404, "no_such_ask", fmt.Sprintf("Offer %d does not exist or is no longer available.", offerID)}
	}
	o := m.offers[idx]
	if m.churned(offerID, now) ||
		(m.cfg.Faults.CreateRace > 0 && draw(m.st.Seed, drawRace, offerID, m.offerSpell(offerID, now)) < m.cfg.Faults.CreateRace) {
		return nil, &apiError{404, "no_such_ask", fmt.Sprintf("Offer %d is no longer available: it was rented by another client.", offerID)}
	}
	// The account's own instances on the machine: on-demand beats
	// interruptible, and a higher bid beats a lower one.
	preempt, err := m.preemptFor(&o, in.Price)
	if err != nil {
		return nil, err
	}
	if in.Disk > o.DiskSpace {
		return nil, &apiError{400, "invalid_args", fmt.Sprintf("disk %.0f GB exceeds the offer's %.0f GB", in.Disk, o.DiskSpace)}
	}
	compute := o.DPHBase
	if in.Price != nil {
		if lo := m.listedMinBid(&o, now); *in.Price < lo {
			return nil, belowMinBid(*in.Price, lo)
		}
		compute = *in.Price
	}
	storage := storageRate(o.StorageCost, in.Disk)
	if m.st.Balance < compute+storage {
		return nil, &apiError{400, "insufficient_credit", "Your account balance is too low to rent this instance: add credit first."}
	}
	var inst *instance
	defer func() {
		if inst == nil {
			return
		}
		for _, h := range preempt {
			h.takenBy(inst, now)
		}
	}()
	seq := m.st.NextID
	m.st.NextID += 1 + int64(draw(m.st.Seed, drawKey, seq, 1)*3)
	id := seq + m.st.IDBase
	fate := offerID<<10 | int64(m.rentals(offerID)&1023)
	gb := m.imageGB(in.Image)
	inst = &instance{
		ID: id, Seq: seq, Fate: fate, OfferID: offerID, Label: in.Label, Image: in.Image, Runtype: in.Runtype, Onstart: in.Onstart,
		Env: in.Env, Disk: in.Disk, Bid: in.Price != nil, ImageGB: gb, ComputeRate: compute, StorageRate: storage,
		APIKey:    instanceKey(),
		CreatedAt: now, Intended: "running", StatusMsg: "Creating instance",
	}
	f := m.cfg.Faults
	risk := m.machineRisk(&o, now)
	stuck, bootFail := scaleOdds(f.StuckLoading, risk), scaleOdds(f.BootFail, risk)
	u := draw(m.st.Seed, drawFault, fate, 0)
	switch {
	case u < stuck:
		inst.Fault = "stuck"
	case u < stuck+bootFail:
		inst.Fault = "bootfail"
	case draw(m.st.Seed, drawOffline, fate, 0) < scaleOdds(f.HostOffline, risk):
		inst.Fault = "offline"
	}
	inst.LoadingAt = now.Add(time.Duration((2 + 8*draw(m.st.Seed, drawCreated, fate, 0)) * float64(time.Second)))
	pull := pullSeconds(gb, o.InetDown)
	setup := 10 + 50*draw(m.st.Seed, drawSetup, fate, 0)
	extract := extractSeconds(gb, o.DiskBW)
	if f.SlowBoot > 0 && draw(m.st.Seed, drawSlow, fate, 0) < f.SlowBoot {
		// A slow host (throttled link, busy disk) is slow with the image
		// only: a multi-GB one takes it past 10 minutes, a small one not.
		k := 5 + 15*draw(m.st.Seed, drawSlowFactor, fate, 0)
		pull, extract = pull*k, extract*k
		if inst.Fault == "" {
			inst.Fault = "slow"
		}
	}
	boot := pull + extract + setup
	inst.ReadyAt = inst.LoadingAt.Add(time.Duration(boot * float64(time.Second)))
	// The image pull is billed per byte as it arrives, so an instance
	// destroyed while loading pays only for what it downloaded.
	inst.PullFrom = inst.LoadingAt
	inst.PullTo = inst.LoadingAt.Add(time.Duration(math.Max(pull, 1) * float64(time.Second)))
	inst.PullCost = o.InetDownCost * gb
	if inst.Fault == "stuck" {
		inst.ReadyAt = time.Time{}
	}
	if inst.Bid {
		inst.OutbidAt = m.outbidAt(offerID, compute, now)
	}
	m.lastMile(inst)
	inst.Keys = append(inst.Keys, m.st.SSHKeys...)
	m.assignPorts(inst)
	inst.log(now, "instance %d created on machine %d (offer %d)", id, o.MachineID, offerID)
	m.st.Instances = append(m.st.Instances, inst)
	m.keyOwner[inst.APIKey] = id
	m.st.Creates[offerID]++
	return inst, nil
}

func (m *Market) find(id int64) *instance {
	for _, in := range m.st.Instances {
		if in.ID == id && !in.Destroyed {
			return in
		}
	}
	return nil
}

func noInstance(id int64) error {
	return &apiError{404, "no_such_instance", fmt.Sprintf("Instance %d not found.", id)}
}

func (m *Market) setState(id int64, want string, now time.Time) error {
	in := m.find(id)
	if in == nil {
		return noInstance(id)
	}
	switch want {
	case "stopped":
		if in.Status != "stopped" || in.Scheduling {
			m.stop(in, now, "stopped by user")
			m.wakeScheduled(now)
		}
		return nil
	case "running":
		return m.start(in, now)
	}
	return &apiError{400, "invalid_args", fmt.Sprintf("state must be running or stopped, not %q", want)}
}

func (m *Market) start(in *instance, now time.Time) error {
	switch in.Status {
	case "running", "loading", "", "rebooting", "offline":
		return nil
	}
	if in.Status == "stopped" && in.Scheduling {
		return nil
	}
	if m.st.Balance <= 0 {
		return &apiError{400, "insufficient_credit", "Your account balance is too low to start this instance."}
	}
	in.Starts++
	in.Intended = "running"
	if in.Status == "stopped" {
		mins := now.Sub(in.StoppedAt).Minutes()
		pTaken := 1 - math.Pow(1-m.cfg.Faults.TakenWhileStopped, mins)
		if m.ownHold(in) {
			in.Scheduling = true
			in.StatusMsg = "Scheduling: waiting for the GPU on this machine; another renter holds it"
			in.log(now, "start requested; GPU busy, scheduling")
			return nil
		}
		if in.Taken || m.churned(in.OfferID, now) || draw(m.st.Seed, drawTaken, in.fate(), in.Starts) < pTaken {
			// Another renter has the GPU: vast waits until their rental
			// ends, which may be hours.
			in.Scheduling, in.Taken = true, true
			in.FreeAt = now.Add(m.rivalHold(in))
			in.StatusMsg = "Scheduling: waiting for the GPU on this machine; another renter holds it"
			in.log(now, "start requested; GPU busy, scheduling")
			return nil
		}
	}
	m.load(in, now)
	return nil
}

// ownHold reports whether one of this account's live instances holds the
// GPUs in's start needs.
func (m *Market) ownHold(in *instance) bool {
	h, held := m.holders()[in.OfferID]
	return (held && h != in) || crowded(&m.offers[m.byID[in.OfferID]], m.gpusInUse())
}

// rivalHold is how much longer another renter keeps the GPU a Scheduling
// instance waits for: 30 minutes to 12 hours, drawn per start.
func (m *Market) rivalHold(in *instance) time.Duration {
	return time.Duration((0.5 + 11.5*draw(m.st.Seed, drawRivalHold, in.fate(), in.Starts)) * float64(time.Hour))
}

// schedule tries a Scheduling instance's start again at t, once the GPU it
// waited for may be free: it loads, or waits on this account's holder.
func (m *Market) schedule(in *instance, t time.Time) {
	in.FreeAt = time.Time{}
	if m.ownHold(in) {
		return // woken when that instance lets go (wakeScheduled)
	}
	in.Scheduling, in.Taken = false, false
	in.log(t, "GPU free again; starting")
	m.load(in, t)
}

// wakeScheduled gives each Scheduling instance waiting on this account's
// own holder a turn at now, after an instance stopped or went.
func (m *Market) wakeScheduled(now time.Time) {
	for _, in := range m.st.Instances {
		if !in.Destroyed && in.Scheduling && in.Status == "stopped" && in.FreeAt.IsZero() {
			m.schedule(in, now)
		}
	}
	// Displaced bids come back highest first, each as the machine has
	// room again.
	var displaced []*instance
	for _, in := range m.st.Instances {
		if !in.Destroyed && in.TakenBy != 0 && in.Outbid && in.Status == "stopped" && in.Intended == "running" {
			displaced = append(displaced, in)
		}
	}
	slices.SortStableFunc(displaced, func(a, b *instance) int { return cmp.Compare(b.ComputeRate, a.ComputeRate) })
	for _, in := range displaced {
		if !m.ownHold(in) {
			in.TakenBy = 0
			m.regain(in, now)
		}
	}
}

// load starts the container of a started instance at now.
func (m *Market) load(in *instance, now time.Time) {
	in.Status = "loading"
	in.StatusMsg = "Starting container"
	in.ReadyAt = now.Add(time.Duration((10 + 30*draw(m.st.Seed, drawRestart, in.fate(), in.Starts)) * float64(time.Second)))
	if in.Fault == "stuck" {
		in.ReadyAt = time.Time{}
	}
	if in.Bid {
		in.Outbid, in.RegainAt = false, time.Time{}
		in.OutbidAt = m.outbidAt(in.OfferID, in.ComputeRate, now)
	}
	in.log(now, "starting")
}

func (m *Market) reboot(id int64, now time.Time) error {
	in := m.find(id)
	if in == nil {
		return noInstance(id)
	}
	if in.Status != "running" {
		return &apiError{400, "invalid_args", fmt.Sprintf("Instance %d is not running.", id)}
	}
	in.Starts++
	in.Status = "rebooting"
	in.StatusMsg = "Rebooting"
	in.ReadyAt = now.Add(time.Duration((10 + 30*draw(m.st.Seed, drawRestart, in.fate(), in.Starts)) * float64(time.Second)))
	in.log(now, "reboot requested")
	return nil
}

func (m *Market) destroy(id int64, now time.Time) error {
	in := m.find(id)
	if in == nil {
		return noInstance(id)
	}
	in.Destroyed = true
	in.DestroyedAt = now
	in.log(now, "destroyed")
	m.wakeScheduled(now)
	return nil
}

// row renders an instance the way the v1 listing and show instance do.
func (m *Market) row(in *instance, now time.Time) InstanceRow {
	o := m.offers[m.byID[in.OfferID]]
	r := InstanceRow{
		ID: in.ID, MachineID: o.MachineID, HostID: o.HostID, BundleID: o.BundleID,
		IntendedStatus: in.Intended, StatusMsg: in.StatusMsg, Label: in.Label,
		ImageUUID: in.Image, ImageArgs: []string{}, ImageRuntype: in.Runtype, Onstart: in.Onstart, ExtraEnv: [][]string{},
		SSHHost: loopbackIP, SSHPort: in.SSHPort, SSHIdx: "0", PublicIPAddr: loopbackIP, LocalIPAddrs: loopbackIP,
		StartDate: float64(in.CreatedAt.Unix()), EndDate: float64(in.CreatedAt.Unix()) + o.Duration,
		NumGPUs: o.NumGPUs, GPUName: o.GPUName, GPURAM: o.GPURAM, GPUTotalRAM: o.GPUTotalRAM,
		CPUCores: o.CPUCores, CPUCoresEffective: o.CPUCoresEffective, CPURAM: o.CPURAM,
		DiskSpace: in.Disk, DiskUtil: -1, InetUp: o.InetUp, InetDown: o.InetDown,
		InetUpCost: o.InetUpCost, InetDownCost: o.InetDownCost, InetDownBilled: in.downloadedKB(now),
		DPHBase: in.ComputeRate, DPHTotal: in.ComputeRate + in.StorageRate,
		StorageCost: o.StorageCost, StorageTotalCost: in.StorageRate,
		IsBid: in.Bid, MinBid: m.listedMinBid(&o, now), Reliability2: o.Reliability2, Verification: o.Verification,
		Geolocation: o.Geolocation, CUDAMaxGood: o.CUDAMaxGood,
	}
	if in.DirectPort > 0 {
		r.DirectPortStart, r.DirectPortEnd, r.DirectPortCount = in.DirectPort, in.DirectPort, 1+len(in.TCPPorts)
	}
	if in.Status != "" {
		s := in.Status
		r.ActualStatus = &s
	}
	r.CurState = "running"
	if in.Status == "stopped" {
		r.CurState = "stopped"
	}
	r.NextState = r.CurState
	if in.Scheduling {
		r.NextState = "running"
	}
	keys := make([]string, 0, len(in.Env))
	for k := range in.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r.ExtraEnv = append(r.ExtraEnv, []string{k, in.Env[k]})
	}
	if in.Status == "running" {
		r.UptimeMins = math.Floor(now.Sub(in.CreatedAt).Minutes())
		// HostIp is loopback, not vast's 0.0.0.0: no simulated address
		// leads anywhere but this machine.
		bind := func(p int) []portEntry {
			return []portEntry{{HostIP: loopbackIP, HostPort: strconv.Itoa(p)}}
		}
		if in.DirectPort > 0 || len(in.TCPPorts) > 0 {
			r.Ports = map[string][]portEntry{}
		}
		if in.DirectPort > 0 {
			r.Ports["22/tcp"] = bind(in.DirectPort)
		}
		for k, p := range in.TCPPorts {
			r.Ports[k] = bind(p)
		}
	}
	// Once the image is down, it unpacks: vast's status says which.
	if in.Status == "loading" && !in.PullTo.IsZero() && !now.Before(in.PullTo) && strings.HasPrefix(in.StatusMsg, "Pulling image ") {
		r.StatusMsg = "Extracting image " + strings.TrimPrefix(in.StatusMsg, "Pulling image ")
	}
	return r
}

// ---- accessors for tests and tools ----

// InstanceState is the simulator's view of one rental, destroyed ones
// included.
type InstanceState struct {
	ID         int64  `json:"id"`
	OfferID    int64  `json:"offer_id"`
	Label      string `json:"label"`
	Status     string `json:"actual_status"`
	Intended   string `json:"intended_status"`
	Scheduling bool   `json:"scheduling"`
	// FreeAt is when another renter lets go of a Scheduling instance's
	// GPU; zero while this account's own instances hold it.
	FreeAt      time.Time `json:"free_at,omitzero"`
	Fault       string    `json:"fault,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	ReadyAt     time.Time `json:"ready_at"` // zero unless booting
	Destroyed   bool      `json:"destroyed"`
	DestroyedAt time.Time `json:"destroyed_at"`
	Spend       float64   `json:"spend"`
	// Bid: interruptible; ComputeRate is its bid (or the on-demand
	// dph_base), $/h while running.
	Bid         bool    `json:"bid,omitempty"`
	ComputeRate float64 `json:"compute_rate"`
	// Outbids counts the times rivals stopped it.
	Outbids int `json:"outbids,omitempty"`
}

// State lists every instance ever created, destroyed ones included, as of now.
func (m *Market) State() []InstanceState {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance(m.cfg.Clock.Now())
	return m.stateLocked()
}

func (m *Market) stateLocked() []InstanceState {
	spend := m.spendLocked()
	out := make([]InstanceState, 0, len(m.st.Instances))
	for _, in := range m.st.Instances {
		s := InstanceState{ID: in.ID, OfferID: in.OfferID, Status: in.Status, Intended: in.Intended,
			Scheduling: in.Scheduling, FreeAt: in.FreeAt, Fault: in.Fault, CreatedAt: in.CreatedAt, ReadyAt: in.ReadyAt,
			Destroyed: in.Destroyed, DestroyedAt: in.DestroyedAt, Spend: spend[in.ID],
			Bid: in.Bid, ComputeRate: in.ComputeRate}
		for _, ev := range in.Events {
			if strings.HasPrefix(ev.Msg, "outbid at") {
				s.Outbids++
			}
		}
		if in.Label != nil {
			s.Label = *in.Label
		}
		out = append(out, s)
	}
	return out
}

// Instances returns every live instance as the API would show it,
// regardless of key.
func (m *Market) Instances() []InstanceRow {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	m.advance(now)
	var out []InstanceRow
	for _, in := range m.st.Instances {
		if !in.Destroyed {
			out = append(out, m.row(in, now))
		}
	}
	return out
}

// Ledger returns every charge so far.
func (m *Market) Ledger() []LedgerEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance(m.cfg.Clock.Now())
	return append([]LedgerEntry(nil), m.st.Ledger...)
}

// Spend is the total charged for one instance so far.
func (m *Market) Spend(instanceID int64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance(m.cfg.Clock.Now())
	return m.spendLocked()[instanceID]
}

func (m *Market) spendLocked() map[int64]float64 {
	s := map[int64]float64{}
	for _, e := range m.st.Ledger {
		s[e.InstanceID] += e.Amount
	}
	return s
}

// Balance is the account's remaining credit.
func (m *Market) Balance() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance(m.cfg.Clock.Now())
	return m.st.Balance
}

// CreatesPerOffer counts successful creates per offer id; a count above 1
// while the first rental still lives means a double rent.
func (m *Market) CreatesPerOffer() map[int64]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int64]int, len(m.st.Creates))
	for k, v := range m.st.Creates {
		out[k] = v
	}
	return out
}

// Seed is the market's seed: the one it was created with, which a saved
// market keeps whatever Config.Seed says when it is opened again.
func (m *Market) Seed() int64 { return m.cfg.Seed }

// Idle is how long the market has had no request (since it opened, when
// it has had none).
func (m *Market) Idle() time.Duration {
	return time.Since(time.Unix(0, m.lastRequest.Load()))
}
