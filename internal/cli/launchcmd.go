package cli

import (
	"context"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// launchOptions are launch's flags: the launch.Request they ask for, and
// what the command does around it.
type launchOptions struct {
	launch.Request
	query  queryFlags
	rank   rankFlags
	From   string
	Resume string
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

	OnInterrupt string
	WaitFor     string
	WaitMax     time.Duration
	cmdutil.JSONFlags
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
func newLaunchCmd(f *factory.Factory, runF func(context.Context, *launchOptions) error) *cobra.Command {
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
			return run(cmd, f, opts, runF, launchRun)
		},
	}
	opts.query.register(cmd, "bid") // --bid takes a price here; -i still means --type bid
	opts.rank.register(cmd, launch.DefaultBy)
	fl := cmd.Flags()
	fl.StringVar(&opts.Bid, "bid", "", "`min|PRICE`: rent interruptible, bidding each offer's min_bid + 5% (min) or PRICE $/hr per machine (vast's create price, as rent --bid); ranks at bid prices")
	fl.StringVar(&opts.OnOutbid, "on-outbid", "", "with --bid, when another renter outbids an instance: replace (destroy it, rent the next offer; default) or rebid (raise its bid up to the on-demand price, then replace)")
	fl.StringVar(&opts.From, "from", "", "read the ranked offers from `FILE`, as written by vastfleet search --save")
	fl.StringVar(&opts.Resume, "resume", "", "continue the launch of FLEET after a crash or Ctrl+C")
	fl.IntVar(&opts.Count, "count", 1, "instances to launch (1.."+strconv.Itoa(launch.MaxCount)+")")
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
	fl.DurationVar(&opts.Ladder.MaxLifetime, "max-lifetime", 0, "teardown ladder: stop each instance this long after it first ran; with --coord its agent holds the limit too, whatever becomes of this machine (0: none)")
	fl.DurationVar(&opts.Ladder.IdleAfter, "idle-after", 0, "teardown ladder, with --coord: each instance's agent stops it once its CPU and GPU use, averaged over this long, stayed below --idle-below (0: none)")
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
	fl.IntVar(&opts.CreateBatch, "create-batch", 0, "most offers one create call rents where the marketplace takes bulk creates (default 64; 1: one offer a call)")
	fl.StringVar(&opts.OnInterrupt, "on-interrupt", "", "on Ctrl+C: keep, destroy-unready or destroy-all (default: ask on a terminal, else destroy-unready)")
	fl.StringVar(&opts.WaitFor, "wait-for", "", "launch only when the top --count offers meet this, e.g. 'vcpu>=5000 dph_per_vcpu<=0.002'")
	fl.DurationVar(&opts.WaitMax, "wait-max", 6*time.Hour, "with --wait-for: give up after this long")
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print one JSON event per line, ending with the summary")
	limitFlags(fl,
		bounds{"count", "1", strconv.Itoa(launch.MaxCount)}, bounds{"min-ready", "0", strconv.Itoa(launch.MaxCount)},
		bounds{"deadline", "0", "720h"}, bounds{"spare", "-1", "10"},
		bounds{"max-dph", "0", "100000"}, bounds{"budget", "0", "1000000"}, bounds{"disk", ">0", "100000"},
		bounds{"boot-timeout", "0", "720h"}, bounds{"release-timeout", "0", "720h"}, bounds{"bad-host-ttl", "0", "8760h"},
		bounds{"workers", "0", "256"}, bounds{"create-batch", "0", "64"}, bounds{"rate", "0", "1000"}, bounds{"wait-max", "0", "8760h"},
		bounds{"image-size", "0", "10000"}, bounds{"orphan-after", "1m", "8760h"},
		bounds{"max-lifetime", "0", "8760h"}, bounds{"idle-after", "0", "8760h"}, bounds{"idle-below", "0", "100"}, bounds{"stopped-for", "0", "8760h"})
	return withNeeds(f, cmd, func([]string) factory.Needs { return factory.Needs{WaitsOnMarket: true} })
}
