package plan

import (
	"sort"
	"strings"
)

// modelKind decides which activation rule applies to a model.
type modelKind int

const (
	kindLLM       modelKind = iota // decoder transformer: activations from hidden size and layers
	kindEncoder                    // BERT/T5: per-sample activation figure
	kindVision                     // ResNet/ViT: per-image activation figure
	kindDiffusion                  // Stable Diffusion: per-image activation figure
	kindSpeech                     // Whisper: per-clip activation figure
)

// Model is a known model: its size and what the activation rules need.
type Model struct {
	Name    string
	ParamsB float64 // parameters, billions
	Kind    modelKind
	// Hidden and Layers drive the LLM activation and KV-cache rules.
	Hidden, Layers int
	// DefBatch and DefSeq are the training batch and sequence length assumed
	// when the task does not give them.
	DefBatch, DefSeq int
	// ActMB is activation memory per training sample at DefSeq in 16-bit,
	// for the non-LLM kinds. These are rounded figures from common
	// fine-tuning setups (ResNet-50 AMP at 224 px ≈ 70 MB/image), so that
	// the ResNet/ViT rule of thumb (≈ 4–8 GB) holds at the default batch.
	ActMB   float64
	Aliases []string
}

func llm(name string, p float64, hidden, layers int, aliases ...string) Model {
	return Model{Name: name, ParamsB: p, Kind: kindLLM, Hidden: hidden, Layers: layers, DefBatch: 1, DefSeq: 2048, Aliases: aliases}
}

func other(name string, kind modelKind, p, actMB float64, batch, seq int, aliases ...string) Model {
	return Model{Name: name, ParamsB: p, Kind: kind, ActMB: actMB, DefBatch: batch, DefSeq: seq, Aliases: aliases}
}

// Models is the known-model table. Parameter counts are the published ones
// (llama-7b is 6.74 B); the bare sizes ("7b") are exact round numbers with a
// llama-shaped architecture.
var Models = []Model{
	llm("llama-7b", 6.74, 4096, 32),
	llm("llama-13b", 13.0, 5120, 40),
	llm("llama-30b", 32.5, 6656, 60),
	llm("llama-65b", 65.2, 8192, 80),
	llm("llama2-7b", 6.74, 4096, 32),
	llm("llama2-13b", 13.0, 5120, 40),
	llm("llama2-70b", 69.0, 8192, 80),
	llm("llama3-8b", 8.03, 4096, 32, "llama3.1-8b"),
	llm("llama3-70b", 70.6, 8192, 80, "llama3.1-70b"),
	llm("mistral-7b", 7.24, 4096, 32),
	llm("mixtral-8x7b", 46.7, 4096, 32, "mixtral"),
	llm("mixtral-8x22b", 141, 6144, 56),
	llm("qwen-7b", 7.72, 4096, 32),
	llm("qwen-14b", 14.2, 5120, 40),
	llm("qwen-72b", 72.3, 8192, 80),
	llm("qwen2-7b", 7.62, 3584, 28),
	llm("qwen2-72b", 72.7, 8192, 80),
	llm("gemma-2b", 2.51, 2048, 18),
	llm("gemma-7b", 8.54, 3072, 28),
	llm("phi-2", 2.78, 2560, 32),
	llm("phi-3-mini", 3.82, 3072, 32, "phi-3"),
	llm("falcon-7b", 7.22, 4544, 32),
	llm("falcon-40b", 41.8, 8192, 60),
	llm("falcon-180b", 180, 14848, 80),
	{Name: "gpt2", ParamsB: 0.124, Kind: kindLLM, Hidden: 768, Layers: 12, DefBatch: 8, DefSeq: 1024, Aliases: []string{"gpt2-small"}},
	{Name: "gpt2-medium", ParamsB: 0.355, Kind: kindLLM, Hidden: 1024, Layers: 24, DefBatch: 8, DefSeq: 1024},
	{Name: "gpt2-large", ParamsB: 0.774, Kind: kindLLM, Hidden: 1280, Layers: 36, DefBatch: 4, DefSeq: 1024},
	{Name: "gpt2-xl", ParamsB: 1.56, Kind: kindLLM, Hidden: 1600, Layers: 48, DefBatch: 2, DefSeq: 1024},
	llm("1b", 1.0, 2048, 16),
	llm("3b", 3.0, 3200, 26),
	llm("7b", 7.0, 4096, 32),
	llm("8b", 8.0, 4096, 32),
	llm("13b", 13.0, 5120, 40),
	llm("34b", 34.0, 8192, 48),
	llm("70b", 70.0, 8192, 80),

	other("bert-base", kindEncoder, 0.110, 30, 32, 128, "bert"),
	other("bert-large", kindEncoder, 0.340, 80, 32, 128),
	other("t5-small", kindEncoder, 0.060, 15, 16, 512),
	other("t5-base", kindEncoder, 0.220, 40, 16, 512, "t5"),
	other("t5-large", kindEncoder, 0.770, 100, 16, 512),
	other("resnet18", kindVision, 0.0117, 55, 64, 0),
	other("resnet50", kindVision, 0.0256, 70, 64, 0),
	other("resnet101", kindVision, 0.0445, 90, 64, 0),
	other("vit-b", kindVision, 0.086, 60, 64, 0, "vit-b16", "vit-base", "vit"),
	other("vit-l", kindVision, 0.304, 80, 32, 0, "vit-l16", "vit-large"),
	other("stable-diffusion", kindDiffusion, 1.07, 1500, 4, 0, "sd", "sd1.5", "stable-diffusion-1.5"),
	other("sdxl", kindDiffusion, 3.5, 4000, 1, 0, "stable-diffusion-xl"),
	other("whisper-tiny", kindSpeech, 0.039, 100, 16, 0),
	other("whisper-base", kindSpeech, 0.074, 150, 16, 0),
	other("whisper-small", kindSpeech, 0.244, 300, 16, 0),
	other("whisper-medium", kindSpeech, 0.769, 500, 16, 0),
	other("whisper-large", kindSpeech, 1.55, 800, 16, 0, "whisper", "whisper-large-v3"),
}

// modelKey folds a name so that "Llama-2-7B", "llama2_7b" and
// "meta-llama/Llama-2-7b-hf" all meet "llama2-7b".
func modelKey(name string) string {
	s := strings.ToLower(strings.TrimSpace(name))
	if i := strings.LastIndex(s, "/"); i >= 0 && !strings.HasPrefix(s[i:], "/16") {
		s = s[i+1:]
	}
	for _, suf := range []string{"-hf", "-chat", "-instruct", "-v0.1", "-base-patch16-224"} {
		s = strings.TrimSuffix(s, suf)
	}
	return strings.NewReplacer("-", "", "_", "", " ", "", "/", "").Replace(s)
}

// LookupModel finds a known model by name or alias.
func LookupModel(name string) (Model, bool) {
	key := modelKey(name)
	for _, m := range Models {
		if modelKey(m.Name) == key {
			return m, true
		}
		for _, a := range m.Aliases {
			if modelKey(a) == key {
				return m, true
			}
		}
	}
	return Model{}, false
}

// suggestModels lists known names within edit distance 2 of name, closest
// first, at most five.
func suggestModels(name string) []string {
	key := modelKey(name)
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, m := range Models {
		if d := EditDistance(key, modelKey(m.Name)); d <= 2 {
			cs = append(cs, cand{m.Name, d})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	var out []string
	for i, c := range cs {
		if i == 5 {
			break
		}
		out = append(out, c.name)
	}
	return out
}

// EditDistance is the Levenshtein distance between a and b.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
