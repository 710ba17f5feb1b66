package plan

import (
	"fmt"
	"math"
	"strings"
)

// Planning constants, each a rule of thumb the issue specifies.
const (
	Headroom        = 1.2  // VRAM ×1.2 for fragmentation, CUDA context, spikes
	Overhead        = 1.3  // hours ×1.3 for setup and slowdowns
	MultiGPUEff     = 0.9  // throughput per GPU when n > 1
	LargestCardGB   = 80   // largest single card planned for (A100/H100 80 GB)
	BaseDiskGB      = 20   // OS, pip cache, logs
	DefaultDiskGB   = 50   // the least disk asked for
	DefaultImageGB  = 8    // an extracted pytorch/pytorch CUDA runtime image
	DefaultCUDA     = 12.1 // what PyTorch 2.x wheels target
	LoRAFraction    = 0.01 // LoRA adapters ≈ 1% of parameters
	LoRAMinParamsB  = 1.0  // fine-tunes of ≥ 1 B parameters default to LoRA
	HighVRAMTierGB  = 48   // the high-VRAM tier's floor
	HighVRAMTrigger = 24   // needs above this also search the high-VRAM tier
)

// Req is what a task needs from the hardware. Hours are RTX 3090 hours on
// one GPU including the 30% overhead; Options scales them per offer.
type Req struct {
	VRAMGB float64 `json:"vram_gb"` // for one copy of the job, headroom included
	// PerGPUGB is what each card must hold: VRAMGB/NumGPUs when the model
	// is sharded (FSDP/DeepSpeed), VRAMGB otherwise.
	PerGPUGB float64  `json:"-"`
	NumGPUs  int      `json:"num_gpus"`
	Sharded  bool     `json:"-"`
	Parallel bool     `json:"-"` // the job spreads over every GPU of an offer
	Hours    float64  `json:"hours"`
	DiskGB   float64  `json:"disk_gb"`
	CUDA     float64  `json:"cuda"`
	ImageGB  float64  `json:"-"`
	Reasons  []string `json:"-"` // one line per rule, for --explain
}

var precisionBytes = map[string]float64{"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1, "int4": 0.5}

// optimizerBytes is optimizer state per trained parameter.
var optimizerBytes = map[string]float64{"adamw": 8, "adam": 8, "adamw8bit": 2, "adam8bit": 2, "sgd": 4, "lion": 4, "adafactor": 1}

var modeAliases = map[string]string{
	"train": "train", "training": "train", "pretrain": "train",
	"finetune": "finetune", "fine-tune": "finetune", "fine_tune": "finetune", "ft": "finetune",
	"inference": "inference", "infer": "inference", "serve": "inference",
}

var distributedKinds = map[string]bool{"": true, "none": true, "ddp": true, "fsdp": true, "deepspeed": true}

func oneOf(m map[string]float64) string {
	var ks []string
	for _, k := range []string{"fp32", "fp16", "bf16", "int8", "int4", "adamw", "adam", "adamw8bit", "adam8bit", "sgd", "lion", "adafactor"} {
		if _, ok := m[k]; ok {
			ks = append(ks, k)
		}
	}
	return strings.Join(ks, ", ")
}

func closest(s string, m map[string]float64) string {
	best, bd := "", 3
	for k := range m {
		if d := EditDistance(s, k); d < bd || (d == bd && k < best) {
			best, bd = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %s?", best)
}

// Requirements applies the sizing rules to t. Each rule appends its
// reasoning to Req.Reasons.
func Requirements(t Task) (Req, error) {
	var r Req
	why := func(format string, a ...any) { r.Reasons = append(r.Reasons, fmt.Sprintf(format, a...)) }

	for _, c := range []struct {
		name string
		v    float64
	}{
		{"params", t.Params}, {"batch_size", float64(t.BatchSize)}, {"seq_len", float64(t.SeqLen)},
		{"dataset_size", t.DatasetSize}, {"dataset_gb", t.DatasetGB}, {"epochs", t.Epochs},
		{"throughput", t.Throughput}, {"hours", t.Hours}, {"gpus", float64(t.GPUs)},
		{"image_gb", t.ImageGB}, {"disk_gb", t.DiskGB}, {"cuda", t.CUDA}, {"max_budget", t.MaxBudget},
	} {
		if c.v < 0 || math.IsNaN(c.v) || math.IsInf(c.v, 0) {
			return Req{}, fmt.Errorf("%s must be positive, got %v", c.name, c.v)
		}
	}

	// Model and size.
	var m Model
	switch {
	case t.Model != "":
		var ok bool
		m, ok = LookupModel(t.Model)
		if !ok && t.Params == 0 {
			if s := suggestModels(t.Model); len(s) > 0 {
				return Req{}, fmt.Errorf("unknown model %q; did you mean %s? (or give params)", t.Model, strings.Join(s, ", "))
			}
			return Req{}, fmt.Errorf("unknown model %q: give its parameter count (params = \"7B\")", t.Model)
		}
		if !ok {
			m = llm(t.Model, t.Params, 0, 0)
		}
	case t.Params > 0:
		m = llm(fmt.Sprintf("%gB-parameter model", t.Params), t.Params, 0, 0)
	default:
		return Req{}, fmt.Errorf("no model: set model (e.g. llama2-7b) or params (e.g. 7B)")
	}
	if t.Params > 0 {
		m.ParamsB = t.Params
	}
	if m.Kind == kindLLM && m.Hidden == 0 {
		// A bare parameter count: borrow the shape of the nearest llama size.
		m.Hidden, m.Layers = llamaShape(m.ParamsB)
	}
	P := m.ParamsB

	prec := strings.ToLower(t.Precision)
	if prec == "" {
		prec = "fp16"
		why("precision not given: assuming fp16")
	}
	pb, ok := precisionBytes[prec]
	if !ok {
		return Req{}, fmt.Errorf("unknown precision %q (want %s)%s", t.Precision, oneOf(precisionBytes), closest(prec, precisionBytes))
	}
	mode := "finetune"
	if t.Mode != "" {
		if mode, ok = modeAliases[strings.ToLower(t.Mode)]; !ok {
			return Req{}, fmt.Errorf("unknown mode %q (want train, finetune or inference)", t.Mode)
		}
	} else {
		why("mode not given: assuming finetune")
	}
	opt := strings.ToLower(t.Optimizer)
	if opt == "" {
		opt = "adamw"
	}
	ob, ok := optimizerBytes[opt]
	if !ok {
		return Req{}, fmt.Errorf("unknown optimizer %q (want %s)%s", t.Optimizer, oneOf(optimizerBytes), closest(opt, optimizerBytes))
	}
	dist := strings.ToLower(t.Distributed)
	if !distributedKinds[dist] {
		return Req{}, fmt.Errorf("unknown distributed %q (want ddp, fsdp, deepspeed or none)", t.Distributed)
	}
	if dist == "none" {
		dist = ""
	}

	// VRAM.
	weights := P * pb
	why("weights: %.3g B params × %g bytes (%s) = %.1f GB", P, pb, prec, weights)
	var state, act float64
	lora := mode == "finetune" && !t.Full && P >= LoRAMinParamsB
	actScale := 1.0 // 16-bit activations; fp32 doubles them
	if prec == "fp32" {
		actScale = 2
	}
	batch, seq := t.BatchSize, t.SeqLen
	switch mode {
	case "inference":
		if batch == 0 {
			batch = 1
		}
		if m.Kind == kindLLM && (t.BatchSize > 0 || t.SeqLen > 0) {
			if seq == 0 {
				seq = m.DefSeq
			}
			act = 2 * float64(m.Layers*m.Hidden) * float64(seq*batch) * 2 / 1e9
			why("KV cache: 2 × %d layers × %d hidden × %d tokens × %d batch × 2 bytes = %.1f GB", m.Layers, m.Hidden, seq, batch, act)
		} else if m.Kind != kindLLM {
			act = float64(batch) * m.ActMB * actScale / 4 / 1000
			why("inference working set: batch %d × %.0f MB × ¼ (no stored activations) = %.1f GB", batch, m.ActMB*actScale, act)
		} else {
			why("inference: weights only; the 20%% headroom covers a short KV cache")
		}
	default:
		if pb < 2 && !lora {
			return Req{}, fmt.Errorf("full training in %s is not supported: use fp16/bf16, or a LoRA fine-tune (QLoRA) on the %s base", prec, prec)
		}
		if lora {
			trainable := P * LoRAFraction
			state = trainable * (2 + 2 + 4 + ob)
			name := "LoRA"
			if pb < 2 {
				name = "QLoRA"
			}
			why("%s fine-tune (set full = true for all weights): adapters ≈ %g%% of params = %.3g B × %g bytes (weights, grads, fp32 master, %s state) = %.1f GB",
				name, LoRAFraction*100, trainable, 8+ob, opt, state)
		} else {
			grad, master := pb, 4.0
			if prec == "fp32" {
				master = 0
			}
			state = P * (grad + master + ob)
			why("full training: grads %g + fp32 master %g + %s state %g bytes/param = %.1f GB", grad, master, opt, ob, state)
		}
		if batch == 0 {
			batch = m.DefBatch
		}
		if seq == 0 {
			seq = m.DefSeq
		}
		if m.Kind == kindLLM {
			act = float64(batch*seq) * float64(m.Hidden) * float64(2*m.Layers+34) * actScale / 1e9
			why("activations (gradient checkpointing): batch %d × seq %d × hidden %d × (2×%d layers + 34) bytes = %.1f GB", batch, seq, m.Hidden, m.Layers, act)
		} else {
			scale := 1.0
			if m.DefSeq > 0 && t.SeqLen > 0 {
				scale = float64(seq) / float64(m.DefSeq)
			}
			act = float64(batch) * m.ActMB * actScale * scale / 1000
			why("activations: batch %d × %.0f MB/sample = %.1f GB", batch, m.ActMB*actScale*scale, act)
		}
	}
	r.VRAMGB = round((weights+state+act)*Headroom, 1)
	why("VRAM: (%.1f + %.1f + %.1f) GB × %.1f headroom = %.1f GB", weights, state, act, Headroom, r.VRAMGB)

	// GPU count.
	r.NumGPUs = 1
	if r.VRAMGB > LargestCardGB {
		need := int(math.Ceil(r.VRAMGB / LargestCardGB))
		r.NumGPUs, r.Sharded = need, true
		why("%.1f GB does not fit one %d GB card: %d GPUs, model sharded (FSDP/DeepSpeed ZeRO-3)", r.VRAMGB, LargestCardGB, need)
		if dist == "ddp" {
			why("DDP keeps a full copy per GPU, which cannot fit: planning for sharding instead")
		}
	}
	if r.NumGPUs == 1 {
		why("GPU count: %.1f GB fits one card (largest planned %d GB)", r.VRAMGB, LargestCardGB)
	}
	if dist != "" {
		r.Parallel = true
		if dist != "ddp" {
			r.Sharded = true
		}
		if r.NumGPUs < 2 && t.GPUs == 0 {
			r.NumGPUs = 2
			why("%s: at least 2 GPUs (set gpus for more)", dist)
		}
	}
	if t.GPUs > 0 {
		switch {
		case t.GPUs > r.NumGPUs:
			r.NumGPUs = t.GPUs
			why("gpus = %d asked for", t.GPUs)
		case t.GPUs < r.NumGPUs:
			why("gpus = %d is too few: need %d", t.GPUs, r.NumGPUs)
		}
	}
	if r.NumGPUs > 1 {
		r.Parallel = true
	}
	r.PerGPUGB = r.VRAMGB
	if r.Sharded {
		r.PerGPUGB = round(r.VRAMGB/float64(r.NumGPUs), 1)
		why("per GPU: %.1f GB / %d = %.1f GB", r.VRAMGB, r.NumGPUs, r.PerGPUGB)
	}

	// Hours (one RTX 3090).
	epochs := t.Epochs
	if epochs == 0 {
		epochs = 1
	}
	switch {
	case t.Hours > 0:
		r.Hours = t.Hours * Overhead
		why("hours: %g h hint (RTX 3090) × %.1f setup/slowdowns = %.2f h", t.Hours, Overhead, r.Hours)
	case t.DatasetSize > 0 && t.Throughput > 0:
		base := t.DatasetSize * epochs / t.Throughput / 3600
		r.Hours = base * Overhead
		why("hours: %g samples × %g epochs / %g samples/s (RTX 3090) = %.2f h × %.1f = %.2f h", t.DatasetSize, epochs, t.Throughput, base, Overhead, r.Hours)
	case t.DatasetSize > 0:
		return Req{}, fmt.Errorf("dataset_size needs throughput (samples/s on an RTX 3090) or an hours hint")
	default:
		r.Hours = 1 * Overhead
		why("hours: no hint or dataset: assuming 1 h × %.1f = %.2f h", Overhead, r.Hours)
	}
	r.Hours = round(r.Hours, 3)

	// Disk.
	r.ImageGB = t.ImageGB
	if r.ImageGB == 0 {
		r.ImageGB = DefaultImageGB
	}
	ckptBytes := 2.0 // a model checkpoint as published (16-bit)
	if prec == "fp32" {
		ckptBytes = 4
	}
	modelFile := P * ckptBytes
	ckpts := 0.0
	switch {
	case mode == "inference":
	case lora:
		ckpts = 2 * P * LoRAFraction * 2
	default:
		ckpts = 2 * P * (ckptBytes + ob) // two kept, with optimizer state to resume
	}
	disk := BaseDiskGB + r.ImageGB + t.DatasetGB + modelFile + ckpts
	why("disk: %d base + %.1f image + %.1f dataset + %.1f model + %.1f checkpoints (2 kept) = %.1f GB", BaseDiskGB, r.ImageGB, t.DatasetGB, modelFile, ckpts, disk)
	if disk < DefaultDiskGB {
		disk = DefaultDiskGB
		why("disk: at least %d GB", DefaultDiskGB)
	}
	if t.DiskGB > 0 {
		if t.DiskGB < disk {
			why("disk_gb = %g is below the estimate %.0f GB: using it anyway", t.DiskGB, math.Ceil(disk))
		}
		disk = t.DiskGB
	}
	r.DiskGB = math.Ceil(disk)

	// CUDA.
	fw := strings.ToLower(t.Framework)
	minCUDA, def := 11.8, DefaultCUDA
	switch fw {
	case "", "pytorch", "torch", "pytorch2":
		fw = "pytorch 2.x"
	case "pytorch1", "torch1":
		fw, minCUDA, def = "pytorch 1.x", 11.3, 11.7
	case "tensorflow", "tf":
		fw, minCUDA, def = "tensorflow", 12.2, 12.2
	case "jax":
		fw, minCUDA, def = "jax", 12.1, 12.1
	default:
		return Req{}, fmt.Errorf("unknown framework %q (want pytorch, pytorch1, tensorflow or jax)", t.Framework)
	}
	r.CUDA = def
	if t.CUDA > 0 {
		if t.CUDA < minCUDA {
			return Req{}, fmt.Errorf("cuda %g is too old for %s (needs ≥ %g)", t.CUDA, fw, minCUDA)
		}
		r.CUDA = t.CUDA
	}
	why("CUDA: %s needs ≥ %g; asking hosts for ≥ %g", fw, minCUDA, r.CUDA)
	return r, nil
}

// llamaShape gives hidden size and layers of the llama model nearest p.
func llamaShape(p float64) (int, int) {
	switch {
	case p < 2:
		return 2048, 16
	case p < 5:
		return 3200, 26
	case p < 10:
		return 4096, 32
	case p < 20:
		return 5120, 40
	case p < 45:
		return 6656, 60
	default:
		return 8192, 80
	}
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// Explain is the reasoning behind r, one rule per line, for --explain.
func (r Req) Explain() string { return strings.Join(r.Reasons, "\n") }
