package plan

import (
	"math"
	"strings"
	"testing"
)

func TestRequirements(t *testing.T) {
	tests := []struct {
		name             string
		task             Task
		vramMin, vramMax float64 // GB, headroom included
		gpus             int
		hours            float64 // RTX 3090 hours incl. 30%
		disk             float64
	}{
		// Rules of thumb: 7B ≈ 16 GB in fp16 for inference, 13B ≈ 28 GB, 70B ≈ 140 GB.
		{"7B fp16 inference (rule of thumb)", Task{Model: "7b", Mode: "inference"}, 16.8, 16.8, 1, 1.3, 50},
		{"llama2-7b inference, published size", Task{Model: "Llama-2-7b-hf", Mode: "inference"}, 15.5, 17, 1, 1.3, 50},
		{"7B fp16 fine-tune is LoRA and fits 24 GB", Task{Model: "llama2-7b", Precision: "fp16", Mode: "finetune"}, 17, 20, 1, 1.3, 50},
		{"7B full fine-tune, Adam 16 B/param", Task{Model: "7b", Precision: "bf16", Mode: "finetune", Full: true}, 130, 140, 2, 1.3, 182},
		{"13B inference", Task{Model: "13b", Mode: "inference"}, 26, 32, 1, 1.3, 54},
		{"70B inference needs multi-GPU", Task{Model: "70b", Mode: "inference"}, 140, 170, 3, 1.3, 168},
		{"70B int4 inference fits one card", Task{Model: "70b", Mode: "inference", Precision: "int4"}, 42, 42, 1, 1.3, 168},
		{"70B LoRA fine-tune", Task{Model: "llama2-70b"}, 170, 190, 3, 1.3, 169},
		{"ResNet-50 on ImageNet", Task{Model: "resnet50", Mode: "train", DatasetSize: 1.28e6, Epochs: 90, Throughput: 1200, DatasetGB: 150}, 4, 8, 1, 34.667, 179},
		{"10-minute ablation", Task{Model: "gpt2", Mode: "train", Hours: 1.0 / 6}, 2, 4, 1, 0.217, 50},
		{"ViT-B training", Task{Model: "vit-b/16", Mode: "train"}, 4, 8, 1, 1.3, 50},
		{"BERT-base fine-tune is full (< 1 B)", Task{Model: "bert-base"}, 3, 4, 1, 1.3, 50},
		{"BERT-large fp32 seq 512", Task{Model: "bert-large", Precision: "fp32", SeqLen: 512}, 28, 34, 1, 1.3, 50},
		{"Whisper inference", Task{Model: "whisper", Mode: "inference"}, 3.5, 4.5, 1, 1.3, 50},
		{"Mixtral fp16 inference", Task{Model: "mixtral-8x7b", Mode: "inference"}, 105, 115, 2, 1.3, 122},
		{"Mixtral int4 inference", Task{Model: "mixtral", Mode: "inference", Precision: "int4"}, 25, 30, 1, 1.3, 122},
		{"DDP forces 2 GPUs", Task{Model: "gpt2", Mode: "train", Distributed: "ddp"}, 2, 4, 2, 1.3, 50},
		{"--gpus override", Task{Model: "7b", Mode: "inference", GPUs: 4}, 16.8, 16.8, 4, 1.3, 50},
		{"--gpus below the need is raised", Task{Model: "70b", Mode: "inference", GPUs: 2}, 168, 168, 3, 1.3, 168},
		{"FSDP with gpus", Task{Model: "13b", Mode: "train", Distributed: "fsdp", GPUs: 8}, 240, 260, 8, 1.3, 314},
		{"hours hint", Task{Model: "7b", Mode: "inference", Hours: 5}, 16.8, 16.8, 1, 6.5, 50},
		{"dataset-based hours", Task{Model: "bert-base", DatasetSize: 100000, Epochs: 3, Throughput: 50}, 3, 4, 1, 2.167, 50},
		{"dataset hours, epochs default 1", Task{Model: "bert-base", DatasetSize: 360000, Throughput: 100}, 3, 4, 1, 1.3, 50},
		{"default disk", Task{Model: "resnet18", Mode: "train"}, 4, 8, 1, 1.3, 50},
		{"big dataset disk", Task{Model: "resnet50", Mode: "train", DatasetGB: 500, Hours: 2}, 4, 8, 1, 2.6, 529},
		{"big image disk", Task{Model: "7b", Mode: "inference", ImageGB: 30}, 16.8, 16.8, 1, 1.3, 64},
		{"explicit disk", Task{Model: "7b", Mode: "inference", DiskGB: 200}, 16.8, 16.8, 1, 1.3, 200},
		{"params instead of a name", Task{Params: 7, Mode: "inference"}, 16.8, 16.8, 1, 1.3, 50},
		{"int4 QLoRA 70B", Task{Model: "70b", Precision: "int4"}, 55, 65, 1, 1.3, 171},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Requirements(tc.task)
			if err != nil {
				t.Fatalf("Requirements: %v", err)
			}
			if r.VRAMGB < tc.vramMin || r.VRAMGB > tc.vramMax {
				t.Errorf("VRAM = %.1f GB, want %.1f–%.1f", r.VRAMGB, tc.vramMin, tc.vramMax)
			}
			if r.NumGPUs != tc.gpus {
				t.Errorf("NumGPUs = %d, want %d", r.NumGPUs, tc.gpus)
			}
			if math.Abs(r.Hours-tc.hours) > 0.001 {
				t.Errorf("Hours = %.3f, want %.3f", r.Hours, tc.hours)
			}
			if r.DiskGB != tc.disk {
				t.Errorf("DiskGB = %v, want %v", r.DiskGB, tc.disk)
			}
			if r.CUDA != 12.1 {
				t.Errorf("CUDA = %v, want 12.1", r.CUDA)
			}
			if len(r.Reasons) < 5 {
				t.Errorf("Reasons too short: %q", r.Reasons)
			}
			if r.Sharded && math.Abs(r.PerGPUGB-r.VRAMGB/float64(r.NumGPUs)) > 0.051 {
				t.Errorf("PerGPUGB = %v, want %v / %d", r.PerGPUGB, r.VRAMGB, r.NumGPUs)
			}
		})
	}
}

func TestRequirementsExplainShowsFormula(t *testing.T) {
	r, err := Requirements(Task{Model: "7b", Mode: "inference"})
	if err != nil {
		t.Fatal(err)
	}
	all := r.Explain()
	for _, want := range []string{
		"weights: 7 B params × 2 bytes (fp16) = 14.0 GB",
		"VRAM: (14.0 + 0.0 + 0.0) GB × 1.2 headroom = 16.8 GB",
		"hours: no hint or dataset: assuming 1 h × 1.3 = 1.30 h",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("reasons lack %q:\n%s", want, all)
		}
	}
}

func TestRequirementsShardingAndDDP(t *testing.T) {
	ddp, err := Requirements(Task{Model: "gpt2", Mode: "train", Distributed: "ddp", GPUs: 4})
	if err != nil {
		t.Fatal(err)
	}
	if ddp.Sharded || ddp.PerGPUGB != ddp.VRAMGB || !ddp.Parallel || ddp.NumGPUs != 4 {
		t.Errorf("DDP replicates: got sharded=%v per=%v vram=%v parallel=%v n=%d", ddp.Sharded, ddp.PerGPUGB, ddp.VRAMGB, ddp.Parallel, ddp.NumGPUs)
	}
	big, err := Requirements(Task{Model: "70b", Mode: "inference", Distributed: "ddp"})
	if err != nil {
		t.Fatal(err)
	}
	if !big.Sharded || big.PerGPUGB != 56 {
		t.Errorf("70B with DDP must be sharded: sharded=%v per=%v", big.Sharded, big.PerGPUGB)
	}
	one, _ := Requirements(Task{Model: "7b", Mode: "inference"})
	if one.Parallel || one.Sharded {
		t.Errorf("single-GPU task marked parallel=%v sharded=%v", one.Parallel, one.Sharded)
	}
}

func TestRequirementsErrors(t *testing.T) {
	tests := []struct {
		name string
		task Task
		want string
	}{
		{"unknown model", Task{Model: "lama-7b"}, `unknown model "lama-7b"; did you mean llama-7b, llama2-7b?`},
		{"unknown model, nothing close", Task{Model: "zebra-9000"}, `unknown model "zebra-9000": give its parameter count`},
		{"no model", Task{}, "no model"},
		{"precision typo", Task{Model: "7b", Precision: "fp61"}, `unknown precision "fp61" (want fp32, fp16, bf16, int8, int4); did you mean fp16?`},
		{"mode typo", Task{Model: "7b", Mode: "trian"}, `unknown mode "trian"`},
		{"optimizer typo", Task{Model: "7b", Optimizer: "adamx"}, `unknown optimizer "adamx"`},
		{"distributed typo", Task{Model: "7b", Distributed: "ddpp"}, `unknown distributed "ddpp"`},
		{"framework typo", Task{Model: "7b", Framework: "pytorhc"}, `unknown framework "pytorhc"`},
		{"negative params", Task{Params: -7}, "params must be positive"},
		{"negative batch", Task{Model: "7b", BatchSize: -1}, "batch_size must be positive"},
		{"negative epochs", Task{Model: "7b", Epochs: -2}, "epochs must be positive"},
		{"negative hours", Task{Model: "7b", Hours: -1}, "hours must be positive"},
		{"negative disk", Task{Model: "7b", DiskGB: -5}, "disk_gb must be positive"},
		{"dataset without throughput", Task{Model: "resnet50", DatasetSize: 1000}, "dataset_size needs throughput"},
		{"full training in int4", Task{Model: "7b", Mode: "train", Precision: "int4"}, "full training in int4 is not supported"},
		{"old CUDA for pytorch 2", Task{Model: "7b", CUDA: 11.3}, "cuda 11.3 is too old for pytorch 2.x (needs ≥ 11.8)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Requirements(tc.task)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLookupModelFolding(t *testing.T) {
	for _, name := range []string{"llama2-7b", "Llama-2-7B", "meta-llama/Llama-2-7b-hf", "llama2_7b", "LLAMA2 7B"} {
		m, ok := LookupModel(name)
		if !ok || m.Name != "llama2-7b" {
			t.Errorf("LookupModel(%q) = %q, %v", name, m.Name, ok)
		}
	}
	if m, ok := LookupModel("vit-b/16"); !ok || m.Name != "vit-b" {
		t.Errorf("vit-b/16 = %q, %v", m.Name, ok)
	}
}

func TestParseParams(t *testing.T) {
	for in, want := range map[string]float64{"7b": 7, "7B": 7, "350M": 0.35, "1.3e9": 1.3, "125000000": 0.125, "13": 13} {
		got, err := ParseParams(in)
		if err != nil || math.Abs(got-want) > 1e-9 {
			t.Errorf("ParseParams(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "seven", "-7b", "0"} {
		if _, err := ParseParams(bad); err == nil {
			t.Errorf("ParseParams(%q) accepted", bad)
		}
	}
}
