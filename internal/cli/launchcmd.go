package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/launch/launchbench"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

type launchOptions struct {
	query    queryFlags
	rank     rankFlags
	From     string
	Resume   string
	Count    int
	MinReady int
	Deadline time.Duration
	Park     bool
	ParkAll  bool
	Backfill bool
	MaxDPH   float64
	Budget   float64
	// BudgetSet: --budget was given (0 then turns the cap off); without
	// it the launch derives a default budget.
	BudgetSet  bool
	MaxRentals int
	ImageGB    float64
	Image      string
	Disk       float64
	Env        string
	Onstart    string
	Sessions   []string
	Fleet      string
	Direct     bool
	// Coord: the coordinator agents report to ("auto": the one running
	// for this data dir); empty runs sessions without an agent.
	Coord       string
	CoordSHA256 string
	// Items: work items (itemspec) the fleet's item-worker sessions
	// share, registered with the coordinator before renting.
	Items        string
	OrphanAfter  time.Duration
	OrphanPolicy string
	// Ladder is the fleet's teardown ladder (--max-lifetime, --idle-*,
	// --stopped-for), applied by reap.
	Ladder fleet.Ladder

	Spare            float64
	BootTimeout      time.Duration
	ReleaseTimeout   time.Duration
	AllowSameMachine bool
	BadHostTTL       time.Duration
	Workers          int
	Rate             float64
	OnInterrupt      string
	WaitFor          string
	WaitMax          time.Duration
	JSONFlags
	// Bid is --bid: min or a price ($/hr per machine); empty rents on
	// demand. OnOutbid is --on-outbid (empty: replace).
	Bid      string
	OnOutbid string
	// OnShortHardware is --on-short-hardware (with --coord): what to do
	// with a node whose boot probe measured less than its offer lists.
	OnShortHardware string
	// ReadyCheck is --ready-check: ssh (a node is ready once its SSH
	// handshake completes), running (the marketplace's word) or auto.
	ReadyCheck string
	// typeSet: a pricing flag (--type, -i, -r, -d) was given.
	typeSet bool
	// Query is the positional query the offers are searched with.
	Query []string
}

// newLaunchCmd parses into launchOptions and hands them to runF (tests) or
// launchRun.
func newLaunchCmd(f *factory, runF func(context.Context, *launchOptions) error) *cobra.Command {
	opts := &launchOptions{}
	cmd := &cobra.Command{
		Use:   "launch [flags] [QUERY...]",
		Short: "Launch a fleet: rent the best N offers, park them as they boot, release together, backfill failures",
		Long: `Rent --count instances from ranked offers (--from results.json, or a query
ranked --by vcpu), in parallel and rate-limited. With --park each instance is
stopped the moment it has booted (only storage bills) and all are started
together as soon as waiting would lose more than it adds: when --min-ready
and a margin for the release's losses are up; when the count is up and
enough are expected to run again (parked GPUs go to other renters by the
minute), what the release loses can still be replaced, or what still loads
is late; or when the deadline is near. Offers that are
gone, hosts that never boot or stall, and restarts whose GPUs were taken are
destroyed and replaced from the next offers, within --max-dph and --budget.

Every launch is bounded: at most --max-rentals rentals (default
max(2 × --count, --count + 10)), and a budget that counts compute, storage
and bandwidth (each rental pulls --image-size GB at its host's
inet_down_cost). Without --budget the launch derives one, --count × the
median $/hr of the first offers × the deadline (or the boot and release
timeouts) plus the image pulls of every rental --max-rentals allows, ×1.5,
and prints it before the first rent;
--budget 0 turns the cap off. A rental that would bring spent plus
committed (what runs, until the deadline) above the budget waits until it
fits; when the projected spend reaches it, renting stops and unready
instances are destroyed.

Every rental is recorded before it is made: after a crash, 'launch --resume
FLEET' continues without renting anything twice, within the launch's
original deadline; 'cleanup FLEET' destroys what is not running.

With --json the last line is the summary: fleet, asked, min_ready, ready,
ready_ids, rented, replaced, failed, destroyed, boot_spend, dph_total,
stopped_at_cap, interrupted, past_deadline_s (seconds the launch ended after
its deadline; negative: before), and for --bid outbid and rebids.

With --bid the instances are interruptible: offers are ranked at bid prices
(as search -b) and every create carries the bid, vast's create "price":
--bid min bids each offer's min_bid + 5% (min_bid moves; exactly it loses
ties), --bid PRICE bids PRICE $/hr per machine (per rental, whatever its GPU
count, as rent --bid), and offers whose min_bid is above PRICE are skipped.
A higher bid from another renter stops an instance without notice:
--on-outbid replace (default) destroys it and rents the next offer; rebid
raises its bid (change bid) by a quarter of min_bid at a time, never above
the offer's on-demand price, and replaces it when that does not win the
machine back. --max-dph, --budget and the reported spend count the bids.

Exit codes: 0 at least --min-ready instances are running (default: --count);
3 the launch ended with fewer (the ready ones keep running: 'cleanup FLEET'
or 'destroy' them); 2 a bad flag or query; 4 the API key was refused;
130 interrupted (instances left as --on-interrupt says; --resume continues);
1 any other error.`,
		Example: `  vastfleet launch --count 300 --deadline 10m --park --by vcpu -n 'rentable=True inet_down>=200 cpu_cores_effective>16 geolocation notin [CN,HK] dph_total<=5'
  vastfleet launch --count 20 --bid min --on-outbid rebid 'cpu_cores_effective>16'
  vastfleet search --by vcpu --all --save results.json 'cpu_cores_effective>16' && vastfleet launch --from results.json --count 50 --park
  vastfleet launch --resume myfleet`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.BudgetSet = cmd.Flags().Changed("budget")
			for _, name := range []string{"type", "interruptible", "reserved", "on-demand"} {
				opts.typeSet = opts.typeSet || cmd.Flags().Changed(name)
			}
			opts.Query = args
			if err := opts.usage(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return launchRun(cmd.Context(), f, opts)
		},
	}
	opts.query.register(cmd, "bid") // --bid takes a price here; -i still means --type bid
	opts.rank.register(cmd, launch.DefaultBy)
	fl := cmd.Flags()
	fl.StringVar(&opts.Bid, "bid", "", "`min|PRICE`: rent interruptible, bidding each offer's min_bid + 5% (min) or PRICE $/hr per machine (vast's create price, as rent --bid); ranks at bid prices")
	fl.StringVar(&opts.OnOutbid, "on-outbid", "", "with --bid, when another renter outbids an instance: replace (destroy it, rent the next offer; default) or rebid (raise its bid up to the on-demand price, then replace)")
	fl.StringVar(&opts.From, "from", "", "read the ranked offers from `FILE`, as written by vastfleet search --save")
	fl.StringVar(&opts.Resume, "resume", "", "continue the launch of FLEET after a crash or Ctrl+C")
	fl.IntVar(&opts.Count, "count", 1, "instances to launch (1..500)")
	fl.IntVar(&opts.MinReady, "min-ready", 0, "quorum: release the parked fleet once this many are ready (default: --count)")
	fl.DurationVar(&opts.Deadline, "deadline", 10*time.Minute, "stop launching after this long (marketplace time); 0 for none")
	fl.BoolVar(&opts.Park, "park", false, "stop each instance as soon as it boots, start all together at the quorum or deadline; an instance whose $/hr saves less than parking risks (its GPUs taken meanwhile) is kept running")
	fl.BoolVar(&opts.ParkAll, "park-all", false, "--park, and park every instance, cheap or not")
	fl.BoolVar(&opts.Backfill, "backfill", true, "replace failed instances from the next offers")
	fl.Float64Var(&opts.Spare, "spare", 0, "with --park: share of --count rented on top as parked spares, for GPUs taken before the release (default: from the share of releases that succeed, 21% lost at first; negative for none)")
	fl.Float64Var(&opts.MaxDPH, "max-dph", 0, "hard cap on the fleet's $/hr (0: none)")
	fl.Float64Var(&opts.Budget, "budget", 0, "hard cap on what the launch spends, $, bandwidth included (default: derived from --count and the offers; 0: none)")
	fl.IntVar(&opts.MaxRentals, "max-rentals", 0, "most rentals the launch makes, replacements included (default max(2×count, count+10))")
	fl.StringVar(&opts.Image, "image", launch.DefaultImage, "docker image")
	fl.Float64Var(&opts.ImageGB, "image-size", 0, "the image's size in GB, for the bandwidth estimate and the boot-time estimate that ranks slow-pulling offers last (default: guessed from the name)")
	fl.Float64Var(&opts.Disk, "disk", launch.DefaultDisk, "disk GB per instance")
	fl.StringVar(&opts.Env, "env", "", "environment: 'KEY=V;KEY2=V2' (TCP_PORTS=8000 and UDP_PORTS=9000 open those ports), or the vastai CLI's Docker flags '-e KEY=V -p 8000:8000'")
	fl.StringVar(&opts.Onstart, "onstart", "", "command to run when each instance starts")
	fl.StringVar(&opts.Coord, "coord", "", "run the agent on every instance, reporting to this coordinator: auto (the `vastfleet coord` running for this data dir) or its https://HOST:PORT")
	fl.StringVar(&opts.CoordSHA256, "coord-sha256", "", "with --coord https://…: the coordinator certificate's sha256 that agents pin (printed by `vastfleet coord --tls`)")
	fl.DurationVar(&opts.OrphanAfter, "orphan-after", wire.DefaultOrphanAft, "with --coord: an agent stops its instance after this long without the coordinator (the dead-man switch)")
	fl.StringVar(&opts.OrphanPolicy, "orphan-policy", wire.PolicyStop, "with --coord: what the dead-man switch does, stop or destroy")
	fl.StringVar(&opts.OnShortHardware, "on-short-hardware", launch.ShortReplace, "with --coord: a node whose boot probe measures under 70% of its offer's cores, RAM or GPUs (or whose probe fails) is replaced and its machine listed as bad (replace), listed and kept (warn), or only reported (keep)")
	fl.StringVar(&opts.ReadyCheck, "ready-check", "auto", "when a running node counts as ready: ssh (its SSH handshake completes), running (the marketplace says so) or auto (ssh, except on a simulator without machines behind its instances)")
	fl.DurationVar(&opts.Ladder.MaxLifetime, "max-lifetime", 0, "teardown ladder: stop each instance this long after it first ran (0: none)")
	fl.DurationVar(&opts.Ladder.IdleAfter, "idle-after", 0, "teardown ladder: stop an instance whose CPU and GPU stayed below --idle-below this long (0: none)")
	fl.Float64Var(&opts.Ladder.IdleBelow, "idle-below", 0, "teardown ladder: the CPU and GPU percentage under which an instance is idle, with --idle-after")
	fl.DurationVar(&opts.Ladder.StoppedFor, "stopped-for", 0, "teardown ladder: destroy an instance once it has been stopped this long (it bills storage meanwhile; 0: never)")
	fl.StringArrayVar(&opts.Sessions, "session", nil, "name:command, a long-running named session per node (repeatable)")
	fl.StringVar(&opts.Items, "items", "", "with --coord: work items shared by the sessions whose command names {item}: a file (one per line), a range 0..9999 or a grid lr=0.1,0.01;bs=32,64; each item runs once per fleet, and a lost node's items go to the others")
	fl.StringVar(&opts.Fleet, "fleet", "", "fleet name (default: fleet-<time>)")
	fl.BoolVar(&opts.Direct, "direct", false, "direct SSH ports instead of the marketplace's proxy")
	fl.DurationVar(&opts.BootTimeout, "boot-timeout", launch.DefaultBootTimeout, "destroy and replace an instance still loading after this")
	fl.DurationVar(&opts.ReleaseTimeout, "release-timeout", launch.DefaultReleaseTimeout, "destroy and replace a released instance not running after this")
	fl.BoolVar(&opts.AllowSameMachine, "allow-same-machine", false, "allow several offers from one machine")
	fl.DurationVar(&opts.BadHostTTL, "bad-host-ttl", launch.DefaultBadHostTTL, "how long machines that failed are skipped")
	fl.IntVar(&opts.Workers, "workers", 0, "concurrent API calls (default 16)")
	fl.Float64Var(&opts.Rate, "rate", 0, "rentals per second (default 4)")
	fl.StringVar(&opts.OnInterrupt, "on-interrupt", "", "on Ctrl+C: keep, destroy-unready or destroy-all (default: ask on a terminal, else destroy-unready)")
	fl.StringVar(&opts.WaitFor, "wait-for", "", "launch only when the top --count offers meet this, e.g. 'vcpu>=5000 dph_per_vcpu<=0.002'")
	fl.DurationVar(&opts.WaitMax, "wait-max", 6*time.Hour, "with --wait-for: give up after this long")
	addJSONFlags(fl, &opts.JSONFlags, "print one JSON event per line, ending with the summary")
	limitFlags(fl,
		bounds{"count", "1", strconv.Itoa(launch.MaxCount)}, bounds{"min-ready", "0", strconv.Itoa(launch.MaxCount)},
		bounds{"deadline", "0", "720h"}, bounds{"spare", "-1", "10"},
		bounds{"max-dph", "0", "100000"}, bounds{"budget", "0", "1000000"}, bounds{"disk", ">0", "100000"},
		bounds{"boot-timeout", "0", "720h"}, bounds{"release-timeout", "0", "720h"}, bounds{"bad-host-ttl", "0", "8760h"},
		bounds{"workers", "0", "256"}, bounds{"rate", "0", "1000"}, bounds{"wait-max", "0", "8760h"},
		bounds{"image-size", "0", "10000"}, bounds{"orphan-after", "1m", "8760h"},
		bounds{"max-lifetime", "0", "8760h"}, bounds{"idle-after", "0", "8760h"}, bounds{"idle-below", "0", "100"}, bounds{"stopped-for", "0", "8760h"})
	return cmd
}

// usage refuses flags that contradict each other or the command, before
// anything runs.
func (o *launchOptions) usage() error {
	switch o.OnInterrupt {
	case "", launch.InterruptKeep, launch.InterruptDestroyUnready, launch.InterruptDestroyAll:
	default:
		return usagef("--on-interrupt %q: use keep, destroy-unready or destroy-all", o.OnInterrupt)
	}
	if o.Resume != "" {
		if len(o.Query) > 0 || o.From != "" {
			return usagef("--resume continues a stored launch: give no query or --from")
		}
		return nil
	}
	if err := o.pricing(); err != nil {
		return err
	}
	if err := o.Ladder.Validate(); err != nil {
		return usagef("%v: --idle-after and --idle-below go together, durations are positive", err)
	}
	if o.Items != "" && o.Coord == "" {
		return usagef("--items needs --coord: the coordinator hands the items out")
	}
	if _, err := launch.ParseOnShort(o.OnShortHardware); err != nil {
		return usagef("--on-short-hardware %q: use replace, warn or keep", o.OnShortHardware)
	}
	switch o.ReadyCheck {
	case "", "auto", "ssh", "running":
	default:
		return usagef("--ready-check %q: use ssh, running or auto", o.ReadyCheck)
	}
	if o.From != "" {
		if len(o.Query) > 0 {
			return usagef("--from %s and a query: the saved ranking already holds the offers", o.From)
		}
	} else if o.rank.Score != "" && o.rank.By != "" {
		return usagef("--by %s and --score: pick one", o.rank.By)
	}
	return nil
}

// launchRun is `launch` once its flags are parsed: a new launch or a
// resumed one.
func launchRun(ctx context.Context, f *factory, opts *launchOptions) error {
	f.waitsOnMarket = true
	args := opts.Query
	onInterrupt := opts.OnInterrupt
	ask := onInterrupt == "" && f.io.InTTY && !opts.JSON
	if onInterrupt == "" {
		onInterrupt = launch.InterruptDestroyUnready
		if ask {
			onInterrupt = launch.InterruptKeep // decided by the question after the interrupt
		}
	}
	if opts.Resume != "" {
		m, err := f.manager(ctx, holderName("launch", "--resume", opts.Resume))
		if err != nil {
			return err
		}
		f.registerFleetKey(ctx, m.P)
		checks, err := f.launchChecks(ctx, opts, opts.Resume)
		if err != nil {
			return err
		}
		view := newLaunchView(f, opts.JSONFlags)
		sum, err := launch.Resume(ctx, m, opts.Resume, view.event, checks)
		return view.finish(ctx, f, m, opts.Resume, sum, err, ask)
	}

	spec, err := opts.spec(onInterrupt)
	if err != nil {
		return err
	}
	if opts.Coord != "" {
		if err := f.withAgent(ctx, &spec, opts); err != nil {
			return err
		}
	}
	opts.rank.spec = &spec // --by useful ranks for this launch
	cands, err := opts.candidates(ctx, f, args)
	if err != nil {
		return err
	}
	if opts.WaitFor != "" {
		if cands, err = waitForWindow(ctx, f, opts, args); err != nil {
			return err
		}
	}
	m, err := f.manager(ctx, holderName("launch", "--fleet", spec.Fleet, "--count", strconv.Itoa(spec.Count)))
	if err != nil {
		return err
	}
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return fmt.Errorf("reconcile before launching: %w", err)
	}
	if !opts.Ladder.IsZero() {
		// Before renting: `vastfleet reap` applies it from the first boot.
		if err := fleet.SaveLadder(ctx, m.S, spec.Fleet, opts.Ladder); err != nil {
			return err
		}
	}
	f.registerFleetKey(ctx, m.P)
	if spec.Checks, err = f.launchChecks(ctx, opts, spec.Fleet); err != nil {
		return err
	}
	view := newLaunchView(f, opts.JSONFlags)
	sum, err := launch.Run(ctx, m, spec, cands, view.event)
	return view.finish(ctx, f, m, spec.Fleet, sum, err, ask)
}

// pricing checks that the ranking's prices are the rentals' prices: --bid
// rents interruptible and ranks at bid prices (the query type bid), and
// without it the rentals are on demand, so a ranking at bid or reserved
// prices would promise prices the rentals do not get.
func (o *launchOptions) pricing() error {
	bidType := o.query.Type == "bid" || o.query.Type == "interruptible"
	if o.Bid == "" {
		switch {
		case bidType:
			return usagef("--type %s ranks offers at interruptible prices, but without --bid the rentals would be on demand: add --bid min (each offer's min_bid + 5%%) or --bid PRICE", o.query.Type)
		case o.query.Type != "on-demand":
			return usagef("--type %s: launch rents on demand or, with --bid, interruptible; drop --type, or add --bid min for interruptible", o.query.Type)
		case o.OnOutbid != "":
			return usagef("--on-outbid is for interruptible launches: add --bid min or --bid PRICE")
		}
		return nil
	}
	if _, err := launch.ParseBid(o.Bid); err != nil {
		return usageError{err}
	}
	switch o.OnOutbid {
	case "", launch.OutbidReplace, launch.OutbidRebid:
	default:
		return usagef("--on-outbid %q: use replace or rebid", o.OnOutbid)
	}
	if o.typeSet && !bidType {
		return usagef("--bid rents interruptible instances, but --type %s ranks offers at %s prices: drop --type (--bid ranks at bid prices) or use --type bid", o.query.Type, o.query.Type)
	}
	o.query.Type = "bid"
	return nil
}

func (o *launchOptions) spec(onInterrupt string) (launch.Spec, error) {
	if o.Count < 1 || o.Count > launch.MaxCount {
		return launch.Spec{}, usagef("--count %d: must be 1..%d", o.Count, launch.MaxCount)
	}
	if o.MinReady < 0 || o.MinReady > o.Count {
		return launch.Spec{}, usagef("--min-ready %d: must be between 1 and --count %d", o.MinReady, o.Count)
	}
	if o.MaxDPH < 0 || o.Budget < 0 {
		return launch.Spec{}, usagef("--max-dph and --budget must be positive (0 means no cap)")
	}
	if o.MaxRentals != 0 && o.MaxRentals < o.Count {
		return launch.Spec{}, usagef("--max-rentals %d: must be at least --count %d", o.MaxRentals, o.Count)
	}
	env, err := launch.ParseEnv(o.Env)
	if err != nil {
		return launch.Spec{}, usagef("--env: %v", err)
	}
	var sessions []launch.Session
	for _, s := range o.Sessions {
		sess, err := launch.ParseSession(s)
		if err != nil {
			return launch.Spec{}, usagef("--session %q: %v", s, err)
		}
		sessions = append(sessions, sess)
	}
	name := o.Fleet
	if name == "" {
		name = "fleet-" + time.Now().UTC().Format("20060102-150405")
	}
	runtype := "ssh"
	if o.Direct {
		runtype = "ssh_direc ssh_proxy"
	}
	spec := launch.Spec{
		Fleet: name, Count: o.Count, MinReady: o.MinReady, Deadline: o.Deadline,
		BootTimeout: o.BootTimeout, ReleaseTimeout: o.ReleaseTimeout,
		Park: o.Park || o.ParkAll, ParkAll: o.ParkAll, Backfill: o.Backfill, Spare: o.Spare, MaxDPH: o.MaxDPH, Budget: o.Budget, BudgetAuto: !o.BudgetSet,
		MaxRentals: o.MaxRentals, ImageGB: o.ImageGB,
		Create:   launch.Create(o.Image, o.Disk),
		Sessions: sessions, AllowSameMachine: o.AllowSameMachine, BadHostTTL: o.BadHostTTL,
		Workers: o.Workers, RentRate: o.Rate, OnInterrupt: onInterrupt,
	}
	spec.Create.Env = env
	spec.Create.Onstart = launch.Onstart(o.Onstart, sessions)
	spec.Create.Runtype = runtype
	if o.Bid != "" {
		b, err := launch.ParseBid(o.Bid)
		if err != nil {
			return launch.Spec{}, usageError{err}
		}
		b.OnOutbid = o.OnOutbid
		spec.Bid = &b
	}
	if err := spec.WithDefaults().Validate(); err != nil {
		return launch.Spec{}, usageError{err}
	}
	return spec, nil
}

// candidates are the ranked offers to launch from: a saved ranking, or every
// offer matching the query (swept past the search cap) ranked by --by.
func (o *launchOptions) candidates(ctx context.Context, f *factory, args []string) ([]market.Ranked, error) {
	if o.From != "" {
		if len(args) > 0 {
			return nil, usagef("--from %s and a query: the saved ranking already holds the offers", o.From)
		}
		b, err := os.ReadFile(o.From)
		if err != nil {
			return nil, usageError{err}
		}
		var ranked []market.Ranked
		if err := json.Unmarshal(b, &ranked); err != nil {
			return nil, usagef("--from %s: not a ranked offer list from `vastfleet search --save` (%v)", o.From, err)
		}
		if len(ranked) == 0 {
			return nil, usagef("--from %s: holds no offers", o.From)
		}
		if o.Bid == "" && slices.ContainsFunc(ranked, func(r market.Ranked) bool { return r.IsBid }) {
			return nil, usagef("--from %s holds offers priced at bids (searched with -b or -i), but without --bid the rentals would be on demand: add --bid min or --bid PRICE, or search again without -b", o.From)
		}
		return ranked, nil
	}
	if o.query.Storage == 5 { // price the launch's own disk, not the search default
		o.query.Storage = o.Disk
	}
	if len(args) == 0 && !o.query.NoDefault {
		fmt.Fprintf(f.io.ErrOut, "no query: launching from offers with %s (give a query, or -n for none)\n", launch.DefaultFilter)
		args = []string{launch.DefaultFilter}
	}
	ranked, _, err := rankedOffers(ctx, f, &o.query, &o.rank, args, o.query.SweepLimit)
	return ranked, err
}

// waitForWindow polls the market until the top --count offers meet
// --wait-for, or --wait-max passes.
func waitForWindow(ctx context.Context, f *factory, opts *launchOptions, args []string) ([]market.Ranked, error) {
	cond, err := launch.ParseWaitFor(opts.WaitFor)
	if err != nil {
		return nil, usagef("--wait-for: %v", err)
	}
	poll := func(ctx context.Context) ([]market.Ranked, error) { return opts.candidates(ctx, f, args) }
	fmt.Fprintf(f.io.ErrOut, "waiting for %s (checking every 10m, at most %s)\n", opts.WaitFor, opts.WaitMax)
	ranked, m, err := launch.WaitFor(ctx, cond, opts.Count, poll, 10*time.Minute, opts.WaitMax, f.Clock())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f.io.ErrOut, "price window open: top %d give %.0f vCPU at $%.3f/hr\n", m.N, m.VCPU, m.DPH)
	return ranked, nil
}

// launchView shows a launch: JSON lines, a live view on a terminal (a bar
// of ready instances, the log above it), or log lines.
type launchView struct {
	f       *factory
	json    bool
	enc     *json.Encoder
	tty     bool
	mu      sync.Mutex
	live    *liveView // opened at the first event, on a terminal
	lastLog time.Time
}

func newLaunchView(f *factory, js JSONFlags) *launchView {
	v := &launchView{f: f, json: js.JSON, tty: f.io.ErrTTY && !js.JSON}
	if js.JSON {
		v.enc = json.NewEncoder(js.out(f.io.Out))
		v.enc.SetEscapeHTML(false)
	}
	return v
}

func (v *launchView) event(e launch.Event) {
	if v.json {
		v.enc.Encode(e)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tty && v.live == nil {
		v.live = openLiveView(v.f.io, "ready")
	}
	w := v.f.io.ErrOut
	if e.Event == launch.EvProgress && e.Progress != nil {
		p := e.Progress
		if v.live != nil {
			v.live.update(int64(p.Ready), int64(p.Asked), fmt.Sprintf("booting %d%s  parked %d  releasing %d", p.Booting, stagesNote(p.Stages), p.Parked, p.Releasing),
				fmt.Sprintf("failed %d", p.Failed), fmt.Sprintf("$%.2f/hr now  $%.2f spent", p.DPH, p.Spent), fmt.Sprintf("%s left", p.TimeLeft.Round(time.Second)))
			return
		}
		// Off a terminal, one progress line a minute of marketplace time.
		if e.At.Sub(v.lastLog) >= time.Minute {
			v.lastLog = e.At
			fmt.Fprintf(w, "%s progress: ready %d/%d  booting %d%s  parked %d  releasing %d  failed %d  $%.2f/hr now  $%.2f spent  %s left\n",
				e.At.UTC().Format("15:04:05"), p.Ready, p.Asked, p.Booting, stagesNote(p.Stages), p.Parked, p.Releasing, p.Failed, p.DPH, p.Spent, p.TimeLeft.Round(time.Second))
		}
		return
	}
	if e.Event == launch.EvSummary {
		return
	}
	msg := e.Msg
	if e.InstanceID != 0 {
		msg = fmt.Sprintf("instance %d %s", e.InstanceID, msg)
	}
	fmt.Fprintf(w, "%s %-11s %s\n", e.At.UTC().Format("15:04:05"), e.Event, termSafe(strings.TrimSpace(msg)))
}

// stagesNote says where the booting nodes are, in boot order:
// " (pulling 3, ssh 1, probe 2)", or nothing.
func stagesNote(st map[string]int) string {
	var parts []string
	for _, k := range []string{launch.StagePulling, launch.StageExtracting, launch.StageLoading, launch.StageSSH, launch.StageAgent, launch.StageProbe} {
		if st[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, st[k]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// stop closes the live view, if one is open; the summary and questions
// come after it.
func (v *launchView) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.live.close()
	v.live = nil
}

// finish prints the summary, and after an interrupt asks what to do with the
// instances (on a terminal, when --on-interrupt was not given).
// A launch that ends with fewer ready than --min-ready (default: every
// instance asked; on --resume, the stored launch's) exits 3, "partial",
// whatever the rest of the summary.
func (v *launchView) finish(ctx context.Context, f *factory, m *fleet.Manager, fleetName string, sum launch.Summary, err error, ask bool) error {
	minReady := sum.MinReady
	if minReady <= 0 {
		minReady = sum.Asked
	}
	if err == nil && !sum.Interrupted && sum.Ready < minReady {
		stopped := ""
		if sum.StoppedAtCap != "" {
			stopped = "; stopped at " + sum.StoppedAtCap
		}
		err = partialError{fmt.Errorf("fleet %s: %d ready of %d asked, below the %d required%s (see `vastfleet ls --fleet %s`; `vastfleet cleanup %s` destroys what is not running)",
			fleetName, sum.Ready, sum.Asked, minReady, stopped, fleetName, fleetName)}
	}
	v.stop()
	if err != nil && !sum.Interrupted {
		return err
	}
	if sum.Interrupted && ask {
		cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		ids, derr := launch.AfterInterrupt(cleanupCtx, m, fleetName, askInterrupt(f.io))
		if derr != nil {
			return derr
		}
		if len(ids) > 0 {
			fmt.Fprintf(f.io.ErrOut, "destroyed %d instance(s)\n", len(ids))
		}
	}
	if v.json {
		return err // the launch emitted the summary line itself
	}
	w := f.io.Out
	fmt.Fprintf(w, "fleet %s: %d ready of %d asked (%d rented, %d replaced, %d failed, %d destroyed)\n",
		fleetName, sum.Ready, sum.Asked, sum.Rented, sum.Replaced, sum.Failed, sum.Destroyed)
	fmt.Fprintf(w, "fleet now: %.0f vCPU, %.0f GB RAM, %d GPUs at $%.3f/hr; boot-phase spend $%.2f; took %s\n",
		sum.VCPU, sum.RAMGB, sum.GPUs, sum.DPHTotal, sum.BootSpend, sum.Elapsed.Round(time.Second))
	if sum.StoppedAtCap != "" {
		fmt.Fprintf(w, "stopped at %s\n", sum.StoppedAtCap)
	}
	if sum.Interrupted {
		fmt.Fprintf(w, "interrupted: continue with `vastfleet launch --resume %s`, or `vastfleet cleanup %s`\n", fleetName, fleetName)
	}
	return err
}

func askInterrupt(ios *IOStreams) string {
	fmt.Fprintf(ios.ErrOut, "\nLaunch interrupted. [k]eep instances (resume later), destroy [u]nready, destroy [a]ll? [k/u/a] ")
	var answer string
	fmt.Fscanln(ios.In, &answer)
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "u", "unready":
		return launch.InterruptDestroyUnready
	case "a", "all":
		return launch.InterruptDestroyAll
	}
	return launch.InterruptKeep
}

// cleanupOptions is what `cleanup` was asked.
type cleanupOptions struct {
	Fleet string
	JSONFlags
}

// newCleanupCmd parses into cleanupOptions and hands them to runF (tests)
// or cleanupRun.
func newCleanupCmd(f *factory, runF func(context.Context, *cleanupOptions) error) *cobra.Command {
	opts := &cleanupOptions{}
	cmd := &cobra.Command{
		Use:   "cleanup FLEET",
		Short: "Destroy every instance of a fleet that is not running",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Fleet = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return cleanupRun(cmd.Context(), f, opts)
		},
	}
	addJSONFlags(cmd.Flags(), &opts.JSONFlags, "print the fleet and the destroyed instance ids as JSON")
	return cmd
}

// cleanupRun is `cleanup` once its arguments are parsed.
func cleanupRun(ctx context.Context, f *factory, opts *cleanupOptions) error {
	m, err := f.manager(ctx, holderName("cleanup", opts.Fleet))
	if err != nil {
		return err
	}
	if _, err := m.S.GetFleet(ctx, opts.Fleet); err != nil {
		return usagef("fleet %q: not found (see `vastfleet ls`)", opts.Fleet)
	}
	ids, err := launch.Cleanup(ctx, m, opts.Fleet)
	if err != nil {
		return err
	}
	if opts.JSON {
		// The keys of `destroy --json`, and the fleet.
		return writeJSON(opts.out(f.io.Out), map[string]any{"action": "destroy", "fleet": opts.Fleet, "ids": append([]int64{}, ids...)})
	}
	fmt.Fprintf(f.io.ErrOut, "destroyed %d instance(s) of fleet %s that were not running\n", len(ids), opts.Fleet)
	return nil
}

// hostsOptions is what `hosts` was asked.
type hostsOptions struct {
	Clear bool
	// MachineIDs are the machines --clear forgets (all when empty).
	MachineIDs []int64
	JSONFlags
}

// newHostsCmd parses into hostsOptions and hands them to runF (tests) or
// hostsRun; machine ids without --clear are a usage error.
func newHostsCmd(f *factory, runF func(context.Context, *hostsOptions) error) *cobra.Command {
	opts := &hostsOptions{}
	cmd := &cobra.Command{
		Use:   "hosts [--clear [MACHINE_ID...]]",
		Short: "Machines that failed to boot, stalled or went offline, skipped by launches for a while",
		RunE: func(cmd *cobra.Command, args []string) error {
			var ids []int64
			for _, a := range args {
				id, err := strconv.ParseInt(a, 10, 64)
				if err != nil || id <= 0 {
					return usagef("machine id %q: want a positive number (see `vastfleet hosts`)", a)
				}
				ids = append(ids, id)
			}
			if len(ids) > 0 && !opts.Clear {
				return usagef("machine ids are for --clear")
			}
			opts.MachineIDs = ids
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return hostsRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Clear, "clear", false, "forget the given machines (all when none are given)")
	addJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	return cmd
}

// hostsRun is `hosts` once its flags are parsed.
func hostsRun(ctx context.Context, f *factory, opts *hostsOptions) error {
	st, err := f.Store(ctx, opts.Clear, holderName("hosts", "--clear"))
	if err != nil {
		return err
	}
	if opts.Clear {
		if err := st.ClearBadHosts(ctx, opts.MachineIDs...); err != nil {
			return err
		}
		fmt.Fprintln(f.io.ErrOut, "cleared")
		return nil
	}
	// Bad hosts expire in the marketplace's time: with the simulator,
	// open it for its clock (if another process has it, wall time).
	if f.opts.Market == "sim" {
		if _, err := f.Provider(ctx); err != nil && !errors.Is(err, sim.ErrInUse) {
			return err
		}
	}
	hs, err := st.BadHosts(ctx, f.Clock().Now())
	if err != nil {
		return err
	}
	if opts.JSON {
		if hs == nil {
			hs = []store.BadHost{}
		}
		return writeJSON(opts.out(f.io.Out), hs)
	}
	t := newTable(f.io.Out, "MACHINE", "REASON", "FAILED", "SKIPPED UNTIL")
	for _, h := range hs {
		t.row(strconv.FormatInt(h.MachineID, 10), h.Reason, h.FailedAt.UTC().Format(time.RFC3339), h.Until.UTC().Format(time.RFC3339))
	}
	return t.flush()
}

// benchLaunchOptions is what `bench launch` was asked.
type benchLaunchOptions struct {
	Config   launchbench.Config
	Profiles []string
	JSONFlags
}

// newBenchCmd is `bench` with launch and rank; each parses into its
// options and hands them to launchF or rankF (tests), or runs them.
func newBenchCmd(f *factory, launchF func(context.Context, *benchLaunchOptions) error, rankF func(context.Context, *benchRankOptions) error) *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Benchmarks on the simulated marketplace"}
	opts := &benchLaunchOptions{}
	cfg := &opts.Config
	bl := &cobra.Command{
		Use:   "launch",
		Short: "Compare launch strategies on one simulated market: start all, manual park, vastfleet",
		Long: `Run the same simulated market under three strategies: start all and wait;
start all, park, release (the manual recipe); and park + backfill + quorum
(vastfleet), once per fault profile (--profile: the simulator's realistic and
harsh profiles by default; "bench" is 30% of hosts slow past 10 minutes, 10%
never boot, offers taken mid-launch). Runs on a virtual clock: seconds, not
minutes.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Count < 1 || cfg.Count > launch.MaxCount {
				return usagef("--count %d: must be 1..%d", cfg.Count, launch.MaxCount)
			}
			if launchF != nil {
				return launchF(cmd.Context(), opts)
			}
			return benchLaunchRun(cmd.Context(), f, opts)
		},
	}
	bl.Flags().IntVar(&cfg.Count, "count", 300, "instances each strategy asks for")
	bl.Flags().DurationVar(&cfg.Deadline, "deadline", 10*time.Minute, "launch deadline")
	bl.Flags().Int64Var(&cfg.Seed, "seed", 1, "market seed")
	bl.Flags().StringSliceVar(&opts.Profiles, "profile", []string{"realistic", "harsh"}, "fault profiles to run, in order: none, realistic, harsh, bench")
	limitFlags(bl.Flags(), bounds{"count", "1", strconv.Itoa(launch.MaxCount)}, bounds{"deadline", "0", "720h"})
	addJSONFlags(bl.Flags(), &opts.JSONFlags, "print JSON")
	cmd.AddCommand(bl, newBenchRankCmd(f, rankF))
	return cmd
}

// benchLaunchRun is `bench launch` once its flags are parsed.
func benchLaunchRun(ctx context.Context, f *factory, opts *benchLaunchOptions) error {
	rows, err := launchbench.RunProfiles(ctx, opts.Config, opts.Profiles)
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(opts.out(f.io.Out), rows)
	}
	fmt.Fprint(f.io.Out, launchbench.Table(rows))
	return nil
}
