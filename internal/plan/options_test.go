package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
)

// offer builds a market offer with the fields the planner reads; vramGB is
// the card's nominal size (24 → 24576 MB as the marketplace reports).
func offer(id int64, gpu string, n int, vramGB, dph, rel, inetDown float64) market.Offer {
	return market.Offer{
		ID: id, MachineID: 1000 + id, GPUName: gpu, NumGPUs: n, GPURAM: vramGB * 1024, GPUTotalRAM: vramGB * 1024 * float64(n),
		DPHTotal: dph, Reliability: rel, InetDown: inetDown, InetUp: inetDown, DiskSpace: 500, CUDAMaxGood: 12.4,
	}
}

// hand is a market where the cheapest, the fastest and the best value are
// three different offers.
func hand() []market.Offer {
	return []market.Offer{
		offer(1, "RTX 3060", 1, 12, 0.05, 0.99, 500),    // too small for 7B
		offer(2, "RTX 3090", 1, 24, 0.20, 0.99, 500),    // cheapest
		offer(3, "RTX 4090", 1, 24, 0.35, 0.93, 1000),   // best value, unreliable
		offer(4, "A100 SXM4", 1, 80, 0.95, 0.995, 2000), //
		offer(5, "H100 SXM", 1, 80, 2.50, 0.99, 2000),   // fastest
		offer(6, "RTX A5000", 1, 24, 0.18, 0.98, 200),   // slow download eats the lower price
	}
}

func labels(res Result) []string {
	var out []string
	for _, o := range res.Options {
		out = append(out, o.Label)
	}
	return out
}

func ids(res Result) []int64 {
	var out []int64
	for _, o := range res.Options {
		out = append(out, o.OfferID)
	}
	return out
}

func hasNote(res Result, sub string) bool {
	return slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, sub) })
}

func TestOptionsPicksAndOrder(t *testing.T) {
	task := Task{Model: "7b", Mode: "inference", Hours: 2} // 2.6 h on a 3090
	r := mustReq(t, task)
	res, err := Options(task, r, hand())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(res), []int64{2, 3, 5}; !slices.Equal(got, want) {
		t.Fatalf("offer ids = %v, want %v (labels %v)", got, want, labels(res))
	}
	if got, want := labels(res), []string{"cheapest", "best value", "fastest"}; !slices.Equal(got, want) {
		t.Errorf("labels = %v, want %v", got, want)
	}
	for i, o := range res.Options {
		if o.Rank != i+1 {
			t.Errorf("option %d rank %d", i, o.Rank)
		}
		if i > 0 && o.EstTotal < res.Options[i-1].EstTotal {
			t.Errorf("not ordered by total: %v after %v", o.EstTotal, res.Options[i-1].EstTotal)
		}
	}
	// 3090: boot = 8 GB × 8000 / 500 Mb/s = 128 s pull + 8 × 2200 / 100
	// MB/s = 176 s unpacking (disk_bw not given) + 40 s container start +
	// 180 s setup; run 2.6 h.
	c := res.Options[0]
	wantHours := 2.6 + 524.0/3600
	if math.Abs(c.Estimate.Hours-wantHours) > 1e-9 || math.Abs(c.Estimate.Total-wantHours*0.20) > 1e-9 {
		t.Errorf("3090 estimate = %+v, want hours %.4f total %.4f", c.Estimate, wantHours, wantHours*0.2)
	}
	if c.EstHours != 2.75 || c.EstTotal != 0.549 {
		t.Errorf("rounded 3090 = %v h $%v", c.EstHours, c.EstTotal)
	}
	// H100: 3.3× a 3090.
	if f := res.Options[2]; math.Abs(f.Estimate.RunHours-2.6/3.3) > 1e-9 {
		t.Errorf("H100 run hours = %v", f.Estimate.RunHours)
	}
	if w := res.Options[1].Warnings; !slices.Contains(w, "budget option — about 7% chance of interruption") {
		t.Errorf("4090 (0.93) warnings = %q", w)
	}
	if w := res.Options[0].Warnings; len(w) != 0 {
		t.Errorf("3090 (0.99) warnings = %q", w)
	}
	if !hasNote(res, "1 of 6 offers do not meet the need (vram 1)") {
		t.Errorf("notes = %q", res.Notes)
	}
	if res.OverBudget {
		t.Error("OverBudget without a budget")
	}
}

func TestOptionsTransferAndStorage(t *testing.T) {
	task := Task{Model: "7b", Mode: "inference", Hours: 1, DatasetGB: 12}
	r := mustReq(t, task)
	o := offer(9, "RTX 3090", 1, 24, 0.30, 0.99, 800)
	o.InetDownCost = 0.01 // $/GB
	o.DPHBase, o.StorageTotalCost = 0.28, 0.02
	res, err := Options(task, r, []market.Offer{o})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Options[0].Estimate
	hours := (8*8000/800.0+176+40+180)/3600 + 1.3
	if math.Abs(e.TransferCost-0.20) > 1e-9 || math.Abs(e.Total-(hours*0.30+0.20)) > 1e-9 || math.Abs(e.StorageCost-hours*0.02) > 1e-9 {
		t.Errorf("estimate = %+v, want transfer 0.20, total %.4f", e, hours*0.30+0.20)
	}
	if got := labels(res); !slices.Equal(got, []string{"cheapest, fastest"}) {
		t.Errorf("one offer: labels %v", got)
	}
}

func TestOptionsCheapestIsFastest(t *testing.T) {
	task := Task{Model: "7b", Mode: "inference", Hours: 2}
	r := mustReq(t, task)
	offers := []market.Offer{
		offer(1, "RTX 4090", 1, 24, 0.10, 0.99, 1000), // cheapest and fastest
		offer(2, "RTX 3090", 1, 24, 0.20, 0.99, 1000),
		offer(3, "RTX A5000", 1, 24, 0.25, 0.99, 1000),
		offer(4, "RTX A5000", 1, 24, 0.40, 0.99, 1000),
	}
	res, err := Options(task, r, offers)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := labels(res), []string{"cheapest, fastest", "best value", "runner-up"}; !slices.Equal(got, want) {
		t.Errorf("labels = %v, want %v", got, want)
	}
	if got, want := ids(res), []int64{1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("ids = %v, want %v", got, want)
	}
}

func TestOptionsFewerThanThreeAndDuplicates(t *testing.T) {
	task := Task{Model: "7b", Mode: "inference", Hours: 2}
	r := mustReq(t, task)
	a := offer(1, "RTX 3090", 1, 24, 0.20, 0.99, 500)
	dup := a
	dup.ID = 11 // same machine, same GPUs, listed twice
	b := offer(2, "RTX 4090", 1, 24, 0.40, 0.99, 500)
	res, err := Options(task, r, []market.Offer{a, dup, b})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(res), []int64{1, 2}; !slices.Equal(got, want) {
		t.Errorf("ids = %v, want %v", got, want)
	}
	if got, want := labels(res), []string{"cheapest", "fastest"}; !slices.Equal(got, want) {
		t.Errorf("labels = %v, want %v", got, want)
	}
}

func TestOptionsRunLengthNotes(t *testing.T) {
	offers := hand()
	short := Task{Model: "7b", Mode: "inference", Hours: 1.0 / 6} // a 10-minute ablation
	res, err := Options(short, mustReq(t, short), offers)
	if err != nil {
		t.Fatal(err)
	}
	if !hasNote(res, "short run") || !hasNote(res, "interruptible") || hasNote(res, "long run") {
		t.Errorf("short task notes = %q", res.Notes)
	}
	long := Task{Model: "7b", Mode: "inference", Hours: 10}
	res, err = Options(long, mustReq(t, long), offers)
	if err != nil {
		t.Fatal(err)
	}
	if !hasNote(res, "long run") || !hasNote(res, "checkpoints") || hasNote(res, "short run") {
		t.Errorf("long task notes = %q", res.Notes)
	}
	mid := Task{Model: "7b", Mode: "inference", Hours: 2}
	res, _ = Options(mid, mustReq(t, mid), offers)
	if hasNote(res, "short run") || hasNote(res, "long run") {
		t.Errorf("2 h task notes = %q", res.Notes)
	}
}

func TestOptionsBudget(t *testing.T) {
	offers := hand()
	all := Task{Model: "7b", Mode: "inference", Hours: 2, MaxBudget: 0.30}
	res, err := Options(all, mustReq(t, all), offers)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OverBudget || !hasNote(res, "every option exceeds max_budget $0.30") {
		t.Errorf("OverBudget = %v, notes %q", res.OverBudget, res.Notes)
	}
	for _, o := range res.Options {
		if !slices.ContainsFunc(o.Warnings, func(w string) bool { return strings.HasPrefix(w, "over budget") }) {
			t.Errorf("option %d lacks the over-budget warning: %q", o.OfferID, o.Warnings)
		}
	}

	some := Task{Model: "7b", Mode: "inference", Hours: 2, MaxBudget: 1.00}
	res, err = Options(some, mustReq(t, some), offers)
	if err != nil {
		t.Fatal(err)
	}
	if res.OverBudget || hasNote(res, "every option") {
		t.Errorf("one option within budget, yet OverBudget = %v notes %q", res.OverBudget, res.Notes)
	}
	for _, o := range res.Options {
		over := slices.ContainsFunc(o.Warnings, func(w string) bool { return strings.HasPrefix(w, "over budget") })
		if over != (o.Estimate.Total > 1.00) {
			t.Errorf("option %d ($%.2f) over-budget warning = %v", o.OfferID, o.Estimate.Total, over)
		}
	}
}

func TestOptionsNothingFits(t *testing.T) {
	task := Task{Model: "70b", Mode: "inference"} // 168 GB on 3 GPUs
	r := mustReq(t, task)
	offers := []market.Offer{
		offer(1, "RTX 4090", 1, 24, 0.3, 0.99, 500),
		offer(2, "A100 SXM4", 1, 80, 1.0, 0.99, 500),
		offer(3, "A100 SXM4", 2, 80, 2.0, 0.99, 500),
	}
	_, err := Options(task, r, offers)
	var nf *NoFitError
	if !errors.As(err, &nf) {
		t.Fatalf("err = %v, want *NoFitError", err)
	}
	msg := err.Error()
	for _, want := range []string{"needs 168.0 GB VRAM (56.0 GB per GPU on 3 GPUs); the largest card among 3 offers is 80 GB", "3× 80 GB cards with sharding", "int8 quantization (≈ 84.0 GB, 2 GPUs)", "int4 quantization (≈ 42.0 GB)", "vram 3"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}

	// A 4× A100 box fits: sharded over 4, each card holds 42 GB, and the
	// run uses all four GPUs.
	four := offer(4, "A100 SXM4", 4, 80, 4.0, 0.99, 500)
	res, err := Options(task, r, append(offers, four))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Options[0].Estimate; got.GPUsUsed != 4 || math.Abs(got.RunHours-1.3/(2.0*4*0.9)) > 1e-9 {
		t.Errorf("4× A100 estimate = %+v", got)
	}

	// Full training suggests LoRA; quantized full training is impossible.
	full := Task{Model: "7b", Mode: "train"}
	_, err = Options(full, mustReq(t, full), []market.Offer{offer(1, "RTX 4090", 2, 24, 0.6, 0.99, 500)})
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "6× 24 GB cards with sharding") || !strings.Contains(err.Error(), "LoRA fine-tune (≈ 19.1 GB)") {
		t.Errorf("full training no-fit = %v", err)
	}

	if _, err := Options(task, r, nil); !errors.As(err, &nf) || !strings.Contains(err.Error(), "3 GPUs with 56.0 GB each in one machine, and no machine on offer has them") {
		t.Errorf("no offers: %v", err)
	}
}

func TestOptionsRejectsDiskAndCUDA(t *testing.T) {
	task := Task{Model: "7b", Mode: "inference", DatasetGB: 300} // disk 336
	r := mustReq(t, task)
	small := offer(1, "RTX 3090", 1, 24, 0.2, 0.99, 500)
	small.DiskSpace = 100
	old := offer(2, "RTX 3090", 1, 24, 0.2, 0.99, 500)
	old.CUDAMaxGood = 11.4
	_, err := Options(task, r, []market.Offer{small, old})
	var nf *NoFitError
	if !errors.As(err, &nf) || nf.Filtered["disk"] != 1 || nf.Filtered["cuda"] != 1 || len(nf.Proposals) != 0 {
		t.Fatalf("err = %v (%+v)", err, nf)
	}
}

func TestOptionsSingleGPUTaskOnMultiGPUOffer(t *testing.T) {
	task := Task{Model: "7b", Mode: "inference", Hours: 2}
	res, err := Options(task, mustReq(t, task), []market.Offer{offer(1, "RTX 3090", 2, 24, 0.4, 0.99, 500)})
	if err != nil {
		t.Fatal(err)
	}
	o := res.Options[0]
	if o.Estimate.GPUsUsed != 1 || math.Abs(o.Estimate.RunHours-2.6) > 1e-9 || !strings.Contains(strings.Join(o.Warnings, ";"), "uses 1 of 2 GPUs") {
		t.Errorf("option = %+v", o)
	}
	ddp := Task{Model: "gpt2", Mode: "train", Distributed: "ddp", Hours: 2}
	res, err = Options(ddp, mustReq(t, ddp), []market.Offer{offer(1, "RTX 3090", 4, 24, 0.8, 0.99, 500)})
	if err != nil {
		t.Fatal(err)
	}
	if e := res.Options[0].Estimate; e.GPUsUsed != 4 || math.Abs(e.RunHours-2.6/(4*0.9)) > 1e-9 {
		t.Errorf("DDP on 4 GPUs: %+v", e)
	}
}

func TestOptionsUnknownGPU(t *testing.T) {
	task := Task{Model: "7b", Mode: "inference", Hours: 2}
	res, err := Options(task, mustReq(t, task), []market.Offer{offer(1, "Mystery X1", 1, 32, 0.2, 0.99, 500)})
	if err != nil {
		t.Fatal(err)
	}
	if o := res.Options[0]; o.Estimate.Speed != UnknownGPUSpeed || !strings.Contains(strings.Join(o.Warnings, ";"), `unknown GPU "Mystery X1"`) {
		t.Errorf("unknown GPU option = %+v", o)
	}
}

func TestResultJSONShape(t *testing.T) {
	task := Task{Model: "7b", Mode: "inference", Hours: 2}
	res, err := Options(task, mustReq(t, task), hand())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if k := keys(got); !slices.Equal(k, []string{"notes", "options", "requirements"}) {
		t.Errorf("top keys = %v", k)
	}
	if k := keys(got["requirements"].(map[string]any)); !slices.Equal(k, []string{"cuda", "disk_gb", "hours", "num_gpus", "vram_gb"}) {
		t.Errorf("requirements keys = %v", k)
	}
	opt := got["options"].([]any)[0].(map[string]any)
	if k := keys(opt); !slices.Equal(k, []string{"dph_total", "est_hours", "est_total", "gpu_name", "label", "num_gpus", "offer_id", "rank", "reliability", "warnings"}) {
		t.Errorf("option keys = %v", k)
	}
	if opt["warnings"] == nil || opt["rank"].(float64) != 1 || opt["label"] != "cheapest" {
		t.Errorf("first option = %v", opt)
	}
}

// A 70B full fine-tune fits no machine: the error says what it needs and
// offers only the ways out the planner can cost, each with its flag, and
// leaves out those the biggest machine on offer could not hold either.
func TestNoFitExplainsA70BFullFineTune(t *testing.T) {
	task := Task{Model: "70b", Mode: "finetune", Full: true, Precision: "bf16"}
	r := mustReq(t, task)
	_, err := Options(task, r, nil)
	var nf *NoFitError
	if !errors.As(err, &nf) {
		t.Fatalf("err = %v, want *NoFitError", err)
	}
	msg := err.Error()
	for _, want := range []string{
		fmt.Sprintf("needs %.1f GB VRAM, %d GPUs with", r.VRAMGB, r.NumGPUs), "no machine on offer has them",
		"an 8-bit optimizer", "--optimizer adamw8bit",
		"a LoRA fine-tune (≈ 185.3 GB, 3 GPUs): --mode finetune without --full",
		"int4 quantization (≈ 59.3 GB): --mode finetune --precision int4 without --full",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	for _, never := range []string{"widen the search", "reliability", "other tiers"} {
		if strings.Contains(msg, never) {
			t.Errorf("error suggests %q, which plan has no flag for:\n%s", never, msg)
		}
	}
	// The biggest machine on offer: 8 cards of 140 GB. An 8-bit optimizer
	// still needs 11 GPUs, so it is left out; LoRA fits.
	nf.Biggest, nf.BiggestGB, nf.BiggestGPUs, nf.BiggestCardGB = "8× H200", 1120, 8, 140
	msg = nf.Error()
	if !strings.Contains(msg, "1120 GB: 8× H200") {
		t.Errorf("biggest machine not named:\n%s", msg)
	}
	for _, p := range nf.Proposals {
		want := p.NumGPUs <= 8 && p.PerGPUGB <= 140
		if strings.Contains(msg, p.Text) != want {
			t.Errorf("proposal %q (%d GPUs, %.1f GB each) shown = %v beside 8× 140 GB:\n%s", p.Text, p.NumGPUs, p.PerGPUGB, !want, msg)
		}
	}
	if strings.Contains(msg, "8-bit optimizer") || !strings.Contains(msg, "LoRA fine-tune") {
		t.Errorf("want LoRA offered and the 8-bit optimizer (11 GPUs) left out:\n%s", msg)
	}
}

// A job announced on one option runs on it or on what the user accepted
// with it: the same GPU model and count at about the same estimate, never
// the fastest option at several times the price (issue 22).
func TestAcceptedStaysInTheAnnouncedClass(t *testing.T) {
	task := Task{Model: "7b", Mode: "inference", Hours: 2}
	r := mustReq(t, task)
	offers := append(hand(),
		offer(7, "RTX 4090", 1, 24, 0.36, 0.99, 1000),  // same class, 3% dearer: accepted
		offer(8, "RTX 4090", 1, 24, 0.60, 0.99, 1000),  // same class, far dearer: not
		offer(9, "RTX 4090", 2, 24, 0.36, 0.99, 1000),  // two cards: another class
		offer(10, "RTX 4090", 1, 24, 0.30, 0.99, 1000), // cheaper: accepted, first
	)
	res, err := Options(task, r, offers)
	if err != nil {
		t.Fatal(err)
	}
	var best Option
	for _, o := range res.Options {
		if o.Label == "best value" {
			best = o
		}
	}
	if best.GPUName != "RTX 4090" {
		t.Fatalf("best value is %s (offer %d), the test expects an RTX 4090", best.GPUName, best.OfferID)
	}
	acc := Accepted(task, r, best, offers)
	var got []int64
	for _, o := range acc {
		got = append(got, o.OfferID)
		if o.GPUName != best.GPUName || o.NumGPUs != best.NumGPUs {
			t.Errorf("offer %d (%dx %s) accepted for an announced %dx %s", o.OfferID, o.NumGPUs, o.GPUName, best.NumGPUs, best.GPUName)
		}
		if o.EstTotal > best.EstTotal*(1+AcceptSlack) || o.EstTotal <= 0 {
			t.Errorf("offer %d estimated $%.3f, announced $%.3f", o.OfferID, o.EstTotal, best.EstTotal)
		}
	}
	if want := []int64{best.OfferID, 10, 7}; !slices.Equal(got, want) {
		t.Errorf("accepted %v, want %v (the announced first, then the class by estimate)", got, want)
	}
}

func TestResultJSONHasNoNullLists(t *testing.T) {
	res := Result{Options: []Option{{Rank: 1}}}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"notes":[]`) || !strings.Contains(s, `"warnings":[]`) || strings.Contains(s, "null") {
		t.Errorf("plan JSON %s: want [] for empty notes and warnings", s)
	}
	if res.Options[0].Warnings != nil {
		t.Error("MarshalJSON changed the caller's options")
	}
}
