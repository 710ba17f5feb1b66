package plan

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/vastfleet/vastfleet/internal/market"
)

// Cost-model constants.
const (
	SetupHours       = 3.0 / 60 // container start, pip installs, data staging
	UnknownGPUSpeed  = 0.5      // assumed for GPUs missing from market.GPUModels
	ReliableEnough   = 0.97     // below this an option is flagged as a budget option
	ShortRunHours    = 1.0
	LongRunHours     = 4.0
	maxOptionsToShow = 3
)

// Estimate is the cost of running the task on one offer.
//
//	BootHours = (image_GB × 8000 / inet_down Mb/s + extraction + 40 s + 180 s) / 3600
//	RunHours  = Req.Hours / (speed(gpu) × n × (0.9 if n > 1))
//	Total     = (BootHours + RunHours) × dph_total + TransferCost
//	TransferCost = (image_GB + dataset_GB) × inet_down_cost ($/GB)
//
// dph_total already prices the allocated disk (the search's
// allocated_storage, which the CLI sets to Req.DiskGB), so StorageCost is
// the storage share of Total, shown for information and not added again.
type Estimate struct {
	GPUsUsed     int
	Speed        float64 // relative to one RTX 3090
	BootHours    float64
	RunHours     float64
	Hours        float64 // BootHours + RunHours
	DPH          float64
	StorageCost  float64
	TransferCost float64
	Total        float64
}

// Option is one costed offer. JSON field names are the CLI's --json output.
type Option struct {
	Rank        int          `json:"rank"`
	Label       string       `json:"label"`
	OfferID     int64        `json:"offer_id"`
	GPUName     string       `json:"gpu_name"`
	NumGPUs     int          `json:"num_gpus"`
	DPHTotal    float64      `json:"dph_total"`
	EstHours    float64      `json:"est_hours"`
	EstTotal    float64      `json:"est_total"`
	Reliability float64      `json:"reliability"`
	Warnings    []string     `json:"warnings"`
	Estimate    Estimate     `json:"-"`
	Offer       market.Offer `json:"-"`
}

// Result is the plan: requirements, up to three options ordered by
// estimated total (rank 1 lowest), and notes. OverBudget is set when every
// option costs more than max_budget; the CLI must then refuse to rent.
type Result struct {
	Requirements Req      `json:"requirements"`
	Options      []Option `json:"options"`
	Notes        []string `json:"notes"`
	OverBudget   bool     `json:"-"`
}

// NoFitError says that no offer meets the requirements, why, and what
// would: more GPUs or quantization, with the figures.
type NoFitError struct {
	TotalGB   float64 // need for one copy of the job
	VRAMGB    float64 // need per GPU
	NumGPUs   int
	Offers    int
	LargestGB float64 // largest card among the offers
	Filtered  map[string]int
	Proposals []Proposal
	// Biggest names the machine on offer with the most GPU memory in all
	// ("8× H200"), when the caller looked it up because no offer had the
	// GPUs the job needs; proposals that would need more GPUs or bigger
	// cards than it has are left out.
	Biggest       string
	BiggestGB     float64 // its GPU memory in all
	BiggestGPUs   int
	BiggestCardGB float64
}

// Proposal is one way out of a no-fit: a change to the task the planner
// knows how to cost, with the flag that makes it and what it then needs.
type Proposal struct {
	Text     string
	VRAMGB   float64
	NumGPUs  int
	PerGPUGB float64
}

// fits reports whether a machine of gpus cards of cardGB each holds p as
// the planner would search for it.
func (p Proposal) fits(gpus int, cardGB float64) bool {
	return p.NumGPUs <= gpus && p.PerGPUGB <= cardGB
}

func (e *NoFitError) Error() string {
	var b strings.Builder
	switch {
	case e.Offers == 0 && e.NumGPUs > 1:
		fmt.Fprintf(&b, "no offer fits: needs %.1f GB VRAM, %d GPUs with %.1f GB each in one machine, and no machine on offer has them",
			e.TotalGB, e.NumGPUs, e.VRAMGB)
	case e.Offers == 0:
		fmt.Fprintf(&b, "no offer fits: needs %.1f GB VRAM on one GPU, and no card on offer has it", e.VRAMGB)
	case e.NumGPUs > 1 && e.TotalGB != e.VRAMGB:
		fmt.Fprintf(&b, "no offer fits: needs %.1f GB VRAM (%.1f GB per GPU on %d GPUs)", e.TotalGB, e.VRAMGB, e.NumGPUs)
	default:
		fmt.Fprintf(&b, "no offer fits: needs %.1f GB VRAM per GPU on %d GPU(s)", e.VRAMGB, e.NumGPUs)
	}
	if e.Offers == 0 {
		if e.Biggest != "" {
			fmt.Fprintf(&b, " (the most GPU memory one machine on offer has is %.0f GB: %s)", e.BiggestGB, e.Biggest)
		}
	} else {
		if e.Filtered["vram"] > 0 {
			fmt.Fprintf(&b, "; the largest card among %d offers is %.0f GB", e.Offers, e.LargestGB)
		}
		_, parts := rejected(e.Filtered)
		fmt.Fprintf(&b, " (rejected: %s)", parts)
	}
	var ways []string
	for _, p := range e.Proposals {
		if e.BiggestGPUs <= 0 || p.fits(e.BiggestGPUs, e.BiggestCardGB) {
			ways = append(ways, p.Text)
		}
	}
	switch {
	case len(ways) > 0:
		fmt.Fprintf(&b, ": %s", strings.Join(ways, " or "))
	case e.Offers == 0 && len(e.Proposals) > 0:
		fmt.Fprintf(&b, "; even %s does not fit one machine on offer", e.Proposals[len(e.Proposals)-1].Text)
	}
	return b.String()
}

// Estimate costs the task on offer o.
func estimate(t Task, r Req, o market.Offer) (Estimate, []string) {
	var warn []string
	n := 1
	if r.Parallel {
		n = max(o.NumGPUs, 1)
	}
	if !r.Parallel && o.NumGPUs > 1 {
		warn = append(warn, fmt.Sprintf("uses 1 of %d GPUs: the task is single-GPU (set distributed to use them all)", o.NumGPUs))
	}
	speed := market.GPUSpeed(o.GPUName)
	if speed == 0 {
		speed = UnknownGPUSpeed
		warn = append(warn, fmt.Sprintf("unknown GPU %q: assumed %.1f× an RTX 3090", o.GPUName, UnknownGPUSpeed))
	}
	eff := 1.0
	if n > 1 {
		eff = MultiGPUEff
	}
	e := Estimate{GPUsUsed: n, Speed: speed, DPH: o.DPHTotal}
	e.BootHours = BootHours(r.ImageGB, &o)
	e.RunHours = r.Hours / (speed * float64(n) * eff)
	e.Hours = e.BootHours + e.RunHours
	e.TransferCost = market.TransferCost(r.ImageGB+t.DatasetGB, 0, o.InetDownCost, o.InetUpCost)
	storagePH := o.StorageTotalCost
	if storagePH == 0 && o.DPHBase > 0 && o.DPHTotal > o.DPHBase {
		storagePH = o.DPHTotal - o.DPHBase
	}
	e.StorageCost = storagePH * e.Hours
	e.Total = e.Hours*o.DPHTotal + e.TransferCost
	return e, warn
}

// rejects says why o cannot run the task, or "" when it can.
func rejects(r Req, o market.Offer) string {
	per := r.PerGPUGB
	if r.Sharded && o.NumGPUs > 0 {
		per = r.VRAMGB / float64(o.NumGPUs)
	}
	switch {
	case o.GPURAM/1000 < per: // GB as the query language counts them
		return "vram"
	case o.NumGPUs < r.NumGPUs:
		return "gpus"
	case o.DiskSpace > 0 && o.DiskSpace < r.DiskGB:
		return "disk"
	case o.CUDAMaxGood > 0 && o.CUDAMaxGood < r.CUDA:
		return "cuda"
	}
	return ""
}

// Options costs every offer that meets r and picks up to three distinct
// ones: "cheapest" (lowest Total), "fastest" (lowest boot + run hours) and
// "best value" (lowest Total × √hours among the rest, so halving the time
// is worth paying up to ≈ 41% more). When the cheapest offer is also the
// fastest it carries both labels and the third slot goes to the
// "runner-up" by value. Options come back ordered by Total ascending.
func Options(t Task, r Req, offers []market.Offer) (Result, error) {
	res := Result{Requirements: r, Options: []Option{}, Notes: []string{}}
	type cand struct {
		o    market.Offer
		e    Estimate
		warn []string
	}
	var cands []cand
	filtered := map[string]int{}
	largest := 0.0
	seen := map[[2]int64]bool{}
	for _, o := range offers {
		largest = math.Max(largest, o.GPURAM)
		if why := rejects(r, o); why != "" {
			filtered[why]++
			continue
		}
		// The same machine listed twice with the same GPUs is one choice.
		key := boxKey(o)
		if seen[key] {
			continue
		}
		seen[key] = true
		e, w := estimate(t, r, o)
		cands = append(cands, cand{o, e, w})
	}
	if len(cands) == 0 {
		return res, noFit(t, r, len(offers), largest/1024, filtered)
	}
	if n, parts := rejected(filtered); n > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d of %d offers do not meet the need (%s)", n, len(offers), parts))
	}

	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].e.Total != cands[j].e.Total {
			return cands[i].e.Total < cands[j].e.Total
		}
		return cands[i].o.ID < cands[j].o.ID
	})
	labels := map[int][]string{}
	cheapest := 0
	labels[cheapest] = append(labels[cheapest], "cheapest")
	// Fastest is the cheapest offer within fastSlack of the shortest time:
	// an 8-GPU box that runs a single-GPU job no faster than one card is
	// not worth its price.
	minHours := cands[0].e.Hours
	for _, c := range cands {
		minHours = math.Min(minHours, c.e.Hours)
	}
	fastest := -1
	for i, c := range cands { // Total order: the first within slack is the cheapest
		if c.e.Hours <= minHours*(1+fastSlack) {
			fastest = i
			break
		}
	}
	labels[fastest] = append(labels[fastest], "fastest")
	value := func(i int) float64 { return cands[i].e.Total * math.Sqrt(cands[i].e.Hours) }
	for _, name := range []string{"best value", "runner-up"} {
		if len(labels) >= maxOptionsToShow || len(labels) == len(cands) {
			break
		}
		if name == "runner-up" && !(cheapest == fastest) {
			break
		}
		best := -1
		for i := range cands {
			if _, taken := labels[i]; taken {
				continue
			}
			if best < 0 || value(i) < value(best) {
				best = i
			}
		}
		labels[best] = []string{name}
	}

	for i, c := range cands { // cands are in Total order, so ranks follow it
		ls, ok := labels[i]
		if !ok {
			continue
		}
		opt := Option{
			Rank:        len(res.Options) + 1,
			Label:       strings.Join(ls, ", "),
			OfferID:     c.o.ID,
			GPUName:     c.o.GPUName,
			NumGPUs:     c.o.NumGPUs,
			DPHTotal:    c.o.DPHTotal,
			EstHours:    round(c.e.Hours, 2),
			EstTotal:    round(c.e.Total, 3),
			Reliability: c.o.Reliability,
			Warnings:    append([]string{}, c.warn...),
			Estimate:    c.e,
			Offer:       c.o,
		}
		if c.o.Reliability < ReliableEnough {
			opt.Warnings = append(opt.Warnings, fmt.Sprintf("budget option — about %.0f%% chance of interruption", math.Round((1-c.o.Reliability)*100)))
		}
		if t.MaxBudget > 0 && c.e.Total > t.MaxBudget {
			opt.Warnings = append(opt.Warnings, fmt.Sprintf("over budget: est. $%.2f > max_budget $%.2f", c.e.Total, t.MaxBudget))
		}
		res.Options = append(res.Options, opt)
	}

	first := res.Options[0]
	if t.MaxBudget > 0 && first.Estimate.Total > t.MaxBudget {
		res.OverBudget = true
		res.Notes = append(res.Notes, fmt.Sprintf("every option exceeds max_budget $%.2f (cheapest est. $%.2f): raise the budget, shorten the run or use interruptible pricing", t.MaxBudget, first.Estimate.Total))
	}
	switch h := first.Estimate.Hours; {
	case h < ShortRunHours:
		res.Notes = append(res.Notes, fmt.Sprintf("short run (%.2f h): interruptible (bid) pricing is usually cheaper, and an interruption costs little", h))
	case h > LongRunHours:
		res.Notes = append(res.Notes, fmt.Sprintf("long run (%.1f h): interruptible/bid pricing with regular checkpoints can cut the cost", h))
	}
	res.Notes = append(res.Notes, fmt.Sprintf("est. total = (boot: %.1f GB image over inet_down, unpacked at disk_bw, + 3 min setup, + run hours) × dph_total (includes %.0f GB disk) + downloads × inet_down_cost", r.ImageGB, r.DiskGB))
	return res, nil
}

// fastSlack is how much slower than the fastest offer still counts as
// fastest when it is cheaper.
const fastSlack = 0.05

// rejected totals the filter counts and lists them by reason.
func rejected(filtered map[string]int) (int, string) {
	total := 0
	var parts []string
	for _, k := range []string{"vram", "gpus", "disk", "cuda"} {
		if n := filtered[k]; n > 0 {
			total += n
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	return total, strings.Join(parts, ", ")
}

func noFit(t Task, r Req, offers int, largestGB float64, filtered map[string]int) error {
	e := &NoFitError{TotalGB: r.VRAMGB, VRAMGB: r.PerGPUGB, NumGPUs: r.NumGPUs, Offers: offers, LargestGB: math.Round(largestGB), Filtered: filtered}
	if offers > 0 && filtered["vram"] == 0 {
		return e // disk or CUDA: nothing the planner could change would help
	}
	card := math.Max(e.LargestGB, 1)
	if k := int(math.Ceil(r.VRAMGB / card)); offers > 0 && k > 1 && largestGB > 0 {
		e.Proposals = append(e.Proposals, Proposal{fmt.Sprintf("%d× %.0f GB cards with sharding (FSDP/DeepSpeed ZeRO-3, %.1f GB each)", k, card, r.VRAMGB/float64(k)), r.VRAMGB, k, r.VRAMGB / float64(k)})
	}
	// What it needs instead: "≈ 84.0 GB, 2 GPUs".
	need := func(rq Req) string {
		if rq.NumGPUs > 1 {
			return fmt.Sprintf("≈ %.1f GB, %d GPUs", rq.VRAMGB, rq.NumGPUs)
		}
		return fmt.Sprintf("≈ %.1f GB", rq.VRAMGB)
	}
	training := modeAliases[strings.ToLower(t.Mode)] == "train" || t.Full
	opt := strings.ToLower(t.Optimizer)
	if training && optimizerBytes[opt] > optimizerBytes["adamw8bit"] || training && opt == "" {
		q := t
		q.Optimizer = "adamw8bit"
		if rq, err := Requirements(q); err == nil && rq.VRAMGB < r.VRAMGB {
			e.Proposals = append(e.Proposals, Proposal{fmt.Sprintf("an 8-bit optimizer (%s): --optimizer adamw8bit", need(rq)), rq.VRAMGB, rq.NumGPUs, rq.PerGPUGB})
		}
	}
	if prec := strings.ToLower(t.Precision); prec == "fp32" {
		q := t
		q.Precision = "bf16"
		if rq, err := Requirements(q); err == nil {
			e.Proposals = append(e.Proposals, Proposal{fmt.Sprintf("a smaller precision (%s): --precision bf16", need(rq)), rq.VRAMGB, rq.NumGPUs, rq.PerGPUGB})
		}
	}
	if training {
		q := t
		q.Mode, q.Full = "finetune", false
		if rq, err := Requirements(q); err == nil && rq.VRAMGB < r.VRAMGB {
			e.Proposals = append(e.Proposals, Proposal{fmt.Sprintf("a LoRA fine-tune (%s): --mode finetune without --full", need(rq)), rq.VRAMGB, rq.NumGPUs, rq.PerGPUGB})
		}
	}
	for _, p := range []string{"int8", "int4"} {
		q := t
		q.Precision = p
		if strings.ToLower(t.Precision) == p || precisionBytes[strings.ToLower(t.Precision)] < precisionBytes[p] && t.Precision != "" {
			continue
		}
		how := "--precision " + p
		rq, err := Requirements(q)
		if err != nil && training {
			// Full training cannot be quantized; LoRA on a quantized base
			// (QLoRA) can.
			q.Mode, q.Full = "finetune", false
			how = "--mode finetune --precision " + p + " without --full"
			rq, err = Requirements(q)
		}
		if err == nil {
			e.Proposals = append(e.Proposals, Proposal{fmt.Sprintf("%s quantization (%s): %s", p, need(rq), how), rq.VRAMGB, rq.NumGPUs, rq.PerGPUGB})
		}
	}
	return e
}

// AcceptSlack is how far above the announced option's estimate another
// offer may be estimated and still be what the user accepted: the same
// GPUs at about the same price.
const AcceptSlack = 0.10

// Accepted are the offers a job that announced option o may run on: o
// first, then every other offer that meets r with o's GPU model and
// count, estimated at most AcceptSlack above o's total, cheapest first,
// each costed as o was. They are the job's only hedges and replacements:
// a job announced on an RTX 4090 never runs on an H200 at seven times
// the price, and a rental other than o comes with its own estimate.
func Accepted(t Task, r Req, o Option, offers []market.Offer) []Option {
	out := []Option{o}
	limit := o.EstTotal * (1 + AcceptSlack)
	seen := map[[2]int64]bool{boxKey(o.Offer): true}
	for _, c := range offers {
		if c.ID == o.OfferID || c.GPUName != o.GPUName || c.NumGPUs != o.NumGPUs || rejects(r, c) != "" {
			continue
		}
		key := boxKey(c)
		if seen[key] {
			continue
		}
		e, w := estimate(t, r, c)
		if e.Total > limit {
			continue
		}
		seen[key] = true
		out = append(out, Option{Label: "accepted replacement", OfferID: c.ID, GPUName: c.GPUName, NumGPUs: c.NumGPUs,
			DPHTotal: c.DPHTotal, EstHours: round(e.Hours, 2), EstTotal: round(e.Total, 3), Reliability: c.Reliability,
			Warnings: w, Estimate: e, Offer: c})
	}
	rest := out[1:]
	sort.SliceStable(rest, func(i, j int) bool {
		if rest[i].EstTotal != rest[j].EstTotal {
			return rest[i].EstTotal < rest[j].EstTotal
		}
		return rest[i].OfferID < rest[j].OfferID
	})
	return out
}

// boxKey tells two listings of one machine with the same GPUs apart from
// two machines: one choice, not two.
func boxKey(o market.Offer) [2]int64 {
	if o.MachineID == 0 {
		return [2]int64{o.ID, -1}
	}
	return [2]int64{o.MachineID, int64(o.NumGPUs)}
}

// MarshalJSON writes the notes and each option's warnings as [] when there
// are none, never null, so a reader of --json need not tell the two apart.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result // without this method
	if r.Notes == nil {
		r.Notes = []string{}
	}
	r.Options = slices.Clone(r.Options)
	for i := range r.Options {
		if r.Options[i].Warnings == nil {
			r.Options[i].Warnings = []string{}
		}
	}
	return json.Marshal(plain(r))
}
