package market

import (
	"math"
	"time"
)

// Ranking by the expected price of a useful node (`--by useful`): a node
// is useful once it is ready by the deadline and kept through the job.
// List price ranks a host that fails one rental in four like one that
// fails one in twenty, and the failures are paid for: the boot, the pull
// and the replacement. The expected cost of one useful node is
//
//	(price × keep + boot waste + failure waste) / P(ready in time and kept)
//
// and offers rank by it, cheapest first: the score is its inverse, useful
// nodes per dollar. It prices a node, not a vCPU: the query's filters
// (cpu_cores_effective>16, say) bound what a node must be, and among the
// nodes they admit the one that costs least to get and keep wins. A job
// that needs vCPUs rather than nodes asks `--by vcpu`, or bounds the node
// size in its query. Ranking by vCPU-hours per dollar of this cost, as
// --by useful first did, paid for cores a job of single-threaded work
// never uses: the demo's job cost 4.5-12% more per node than --by vcpu.

// HostRecord is what this data dir knows of a machine: the caller reads it
// from its store (the bad-host list), so that market imports no store.
type HostRecord struct {
	// Bad: a launch on the machine failed and the ban has not expired.
	Bad bool
	// Failures is how many earlier rentals on the machine failed (expired
	// bans included).
	Failures int
}

// Useful scores offers by their expected price of a useful node.
type Useful struct {
	// ImageGB is the image's size, for the pull and its cost.
	ImageGB float64
	// Load estimates how long o takes from create to running the image
	// (plan.LoadTime: the pull at inet_down, the extraction at disk_bw,
	// the container start).
	Load func(o *Offer) time.Duration
	// Deadline is how long a rental has to be ready; a host that fails is
	// noticed, and paid for, that long.
	Deadline time.Duration
	// KeepHours is how long a node must stay up once ready (0: one hour).
	KeepHours float64
	// OutbidPerHour is the rate at which this account's interruptible
	// rentals were seen outbid, per hour; it counts for bid offers only.
	OutbidPerHour float64
	// Record gives a machine's record; nil: none known.
	Record func(machineID int64) HostRecord
}

// Calibration of the failure model, from the market-wide figures in
// market-facts.md and issue 26: hosts at reliability 0.98 and above fail
// about one rental in twenty, those below 0.90 about one in four; a fifth
// of boots run 5-20× slower than the listing's speeds promise; a host that
// fails at boot is about five times as likely to drop offline later.
const (
	// faultPerUnreliability turns 1-reliability into a fault hazard.
	faultPerUnreliability = 2.0
	// minUnreliability: even 0.999 hosts fail now and then.
	minUnreliability = 0.01
	// slowBootShare of boots run slowBootMin..slowBootMax × their estimate.
	slowBootShare = 0.2
	slowBootMin   = 5.0
	slowBootMax   = 20.0
	// offlinePerFault is the chance of dropping offline during an hour
	// kept, per unit of boot-fault chance.
	offlinePerFault = 0.2
)

// UsefulTerms are the parts of an offer's useful score, for --explain.
type UsefulTerms struct {
	Price     float64 `json:"price"`      // dph_total, $/hr
	LoadS     float64 `json:"load_s"`     // estimated seconds to running
	PFault    float64 `json:"p_fault"`    // the rental fails at boot (stuck, exits)
	POnTime   float64 `json:"p_on_time"`  // a sound boot is ready by the deadline
	PKept     float64 `json:"p_kept"`     // a ready node stays up (not offline, not outbid) for the keep
	P         float64 `json:"p_useful"`   // (1-p_fault) × p_on_time × p_kept
	BootWaste float64 `json:"boot_waste"` // $ per rental before it is useful: the pull and the paid load time
	FailWaste float64 `json:"fail_waste"` // expected $ per rental lost to a fault, noticed at the deadline
	Cost      float64 `json:"cost"`       // expected $ per useful node kept KeepHours
	Score     float64 `json:"score"`      // 1 / cost: useful nodes per dollar (0: none)
}

// Name is the ranking's name, as --by takes it.
func (u *Useful) Name() string { return "useful" }

// Score is UsefulTerms(o).Score, useful nodes per dollar: higher is
// better, and the order is that of the cost per useful node, lowest first.
func (u *Useful) Score(o *Offer) float64 { return u.Terms(o).Score }

// Factors lists the terms, for search --explain.
func (u *Useful) Factors(o *Offer) []Factor {
	t := u.Terms(o)
	return []Factor{
		{"cpu_cores_effective", o.CPUCoresEffective}, {"dph_total", t.Price}, {"load_s", t.LoadS},
		{"p_fault", t.PFault}, {"p_on_time", t.POnTime}, {"p_kept", t.PKept}, {"p_useful", t.P},
		{"boot_waste", t.BootWaste}, {"fail_waste", t.FailWaste}, {"cost_per_useful_node", t.Cost},
	}
}

// FaultChance is the chance a rental of o fails at boot: a hazard that
// grows with 1-reliability, lower on verified hosts and higher on
// unverified and deverified ones, doubled for each failure on the
// machine's record (at most twice).
func FaultChance(o *Offer, rec HostRecord) float64 {
	q := max(1-o.Reliability, minUnreliability)
	switch o.Verification {
	case "verified":
		q *= 0.8
	case "deverified":
		q *= 3
	default:
		q *= 1.5
	}
	q *= math.Pow(2, float64(min(rec.Failures, 2)))
	return 1 - math.Exp(-faultPerUnreliability*q)
}

// OnTimeChance is the chance a sound boot estimated at load is ready
// within deadline: the usual boot is as estimated, a slow one
// slowBootMin..slowBootMax times longer.
func OnTimeChance(load, deadline time.Duration) float64 {
	if deadline <= 0 {
		return 1
	}
	if load <= 0 {
		load = time.Second
	}
	head := deadline.Seconds() / load.Seconds()
	p := 0.0
	if head >= 1 {
		p = 1 - slowBootShare
	}
	slow := (head - slowBootMin) / (slowBootMax - slowBootMin)
	return p + slowBootShare*math.Min(1, math.Max(0, slow))
}

// Terms computes the useful score of o and its parts.
func (u *Useful) Terms(o *Offer) UsefulTerms {
	keep := u.KeepHours
	if keep <= 0 {
		keep = 1
	}
	var rec HostRecord
	if u.Record != nil {
		rec = u.Record(o.MachineID)
	}
	t := UsefulTerms{Price: o.DPHTotal}
	var load time.Duration
	if u.Load != nil {
		load = u.Load(o)
	} else {
		load = time.Duration((PullSeconds(u.ImageGB, o.InetDown) + ExtractSeconds(u.ImageGB, o.DiskBW)) * float64(time.Second))
	}
	t.LoadS = load.Seconds()
	t.PFault = FaultChance(o, rec)
	t.POnTime = OnTimeChance(load, u.Deadline)
	hazard := -math.Log1p(-offlinePerFault * t.PFault)
	if o.IsBid {
		hazard += max(u.OutbidPerHour, 0)
	}
	t.PKept = math.Exp(-hazard * keep)
	t.P = (1 - t.PFault) * t.POnTime * t.PKept
	if rec.Bad {
		t.P = 0 // a launch skips it: no chance of a useful node
	}
	pull := o.PullCost(u.ImageGB)
	t.BootWaste = pull + o.DPHTotal*t.LoadS/3600
	t.FailWaste = t.PFault * (pull + o.DPHTotal*u.Deadline.Hours())
	if o.DPHTotal <= 0 || t.P <= 0 {
		t.Cost = math.Inf(1)
		return t
	}
	t.Cost = (o.DPHTotal*keep + t.BootWaste + t.FailWaste) / t.P
	t.Score = 1 / t.Cost
	return t
}
