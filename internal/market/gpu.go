package market

import "strings"

// GPUModel is what vastfleet knows about a GPU model, by the name vast.ai
// reports in gpu_name.
type GPUModel struct {
	Name string
	// VRAMMB is the memory of one card in MB (MiB, as the marketplace reports).
	VRAMMB float64
	// Speed is relative FP16 training throughput, RTX 3090 = 1.0.
	//
	// RTX 3060 0.5, 3090 1.0, 4090 1.6, A5000 0.9, A6000 1.1, L40S 1.5,
	// A100 SXM 2.0 and H100 SXM 3.3 are the published relative-speed table
	// vastfleet is specified with. The other rows are our estimates from
	// NVIDIA's datasheet dense FP16 tensor TFLOPS and memory bandwidth,
	// scaled to that table and rounded to 0.05; a user's measured workload
	// beats any of them.
	Speed float64
}

// GPUModels lists the models vastfleet knows, slowest first.
var GPUModels = []GPUModel{
	{"GTX 1060", 6144, 0.15},
	{"GTX 1070", 8192, 0.2},
	{"GTX 1080 Ti", 11264, 0.3},
	{"RTX 2070", 8192, 0.4},
	{"RTX 2080 Ti", 11264, 0.6},
	{"RTX 3060", 12288, 0.5},
	{"RTX 3060 Ti", 8192, 0.55},
	{"RTX 3070", 8192, 0.6},
	{"RTX 3080", 10240, 0.8},
	{"RTX 3080 Ti", 12288, 0.9},
	{"RTX 3090", 24576, 1.0},
	{"RTX 3090 Ti", 24576, 1.1},
	{"RTX 4060 Ti", 16384, 0.55},
	{"RTX 4070", 12288, 0.8},
	{"RTX 4080", 16384, 1.25},
	{"RTX 4090", 24576, 1.6},
	{"RTX 5090", 32768, 2.2},
	{"RTX A4000", 16384, 0.6},
	{"RTX A5000", 24576, 0.9},
	{"RTX A6000", 49152, 1.1},
	{"RTX 6000Ada", 49152, 1.7},
	{"Tesla V100", 16384, 0.8},
	{"A10", 24576, 0.7},
	{"L4", 24576, 0.6},
	{"A40", 49152, 1.0},
	{"L40", 49152, 1.4},
	{"L40S", 49152, 1.5},
	{"A100 PCIE", 40960, 1.8},
	{"A100 SXM4", 81920, 2.0},
	{"H100 PCIE", 81920, 2.6},
	{"H100 SXM", 81920, 3.3},
	{"H200", 143360, 3.6},
}

// LookupGPU finds a model by its marketplace name, ignoring case, spaces,
// underscores and the "RTX "/"Tesla " prefixes, so "a5000", "RTX_A5000" and
// "RTX A5000" all match.
func LookupGPU(name string) (GPUModel, bool) {
	key := gpuKey(name)
	for _, m := range GPUModels {
		if gpuKey(m.Name) == key {
			return m, true
		}
	}
	return GPUModel{}, false
}

// GPUSpeed is the relative FP16 speed of a model (RTX 3090 = 1.0); unknown
// models get 0 so that they never rank above a known one by accident.
func GPUSpeed(name string) float64 {
	m, ok := LookupGPU(name)
	if !ok {
		return 0
	}
	return m.Speed
}

func gpuKey(name string) string {
	s := strings.ToLower(strings.NewReplacer("_", "", " ", "", "-", "").Replace(name))
	for _, p := range []string{"nvidia", "tesla", "geforce"} {
		s = strings.TrimPrefix(s, p)
	}
	if strings.HasPrefix(s, "rtxa") {
		s = s[3:]
	}
	s = strings.TrimSuffix(strings.TrimSuffix(s, "sxm4"), "sxm") + map[bool]string{true: "sxm"}[strings.Contains(s, "sxm")]
	return s
}
