package plan

import (
	"fmt"
	"math"
)

// Tier is one marketplace search. The planner never searches for one GPU
// model: each tier is a class of cards that meets the need.
type Tier struct {
	Name  string
	Query string // vast.ai query language (vast-api.md §4), for market.Parse
	Order string // -o value, e.g. "dph_total" or "dlperf-"
	Why   string
}

// Tiers are the searches that can satisfy r: budget cards that meet the
// per-GPU VRAM need, the fastest such cards, and high-VRAM cards (≥ 48 GB)
// when the need is over 24 GB. Every query asks reliability > 0.95 and
// inet_down > 100 Mb/s. gpu_ram in a query is GB (×1000 on the wire), so a
// 24 GB card (24576 MB) matches gpu_ram>=24.
func Tiers(r Req) []Tier {
	per := math.Ceil(r.PerGPUGB*10) / 10
	n := max(r.NumGPUs, 1)
	// A job that uses one card gains nothing from an 8-GPU box, whose
	// dlperf would top the "fast" tier; jobs that spread over the GPUs (or
	// shard a model) take any box with enough of them.
	count := fmt.Sprintf("num_gpus=%d", n)
	if r.Parallel || r.Sharded {
		count = fmt.Sprintf("num_gpus>=%d", n)
	}
	common := fmt.Sprintf("%s reliability>0.95 inet_down>100 disk_space>=%g cuda_max_good>=%g", count, r.DiskGB, r.CUDA)
	gpus := "1 GPU"
	if n > 1 {
		gpus = fmt.Sprintf("%d GPUs", n)
	}
	tiers := []Tier{
		{
			Name:  "budget",
			Query: fmt.Sprintf("gpu_ram>=%g %s", per, common),
			Order: "dph_total",
			Why:   fmt.Sprintf("cheapest cards with ≥ %g GB each, %s", per, gpus),
		},
		{
			Name:  "fast",
			Query: fmt.Sprintf("gpu_ram>=%g %s", per, common),
			Order: "dlperf-",
			Why:   fmt.Sprintf("fastest cards with ≥ %g GB each, %s", per, gpus),
		},
	}
	if r.PerGPUGB > HighVRAMTrigger {
		hv := math.Max(HighVRAMTierGB, per)
		tiers = append(tiers, Tier{
			Name:  "high-vram",
			Query: fmt.Sprintf("gpu_ram>=%g %s", hv, common),
			Order: "dph_total",
			Why:   fmt.Sprintf("need %.1f GB per GPU is over %d GB: cards with ≥ %g GB", r.PerGPUGB, HighVRAMTrigger, hv),
		})
	}
	return tiers
}
