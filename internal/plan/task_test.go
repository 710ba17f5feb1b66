package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const sampleTOML = `# vastfleet config
[fleet]
name = "ignored"
tags = ["a", "b"]   # arrays are fine outside [task]

[task]
model = "llama2-7b"        # a known model
precision = 'bf16'
mode = "finetune"
full = false
optimizer = "adamw"
batch_size = 4
seq_len = 2_048
dataset_size = 50000
dataset_gb = 2.5
epochs = 3
throughput = 12.5
distributed = "none"
gpus = 1
image = "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"
image_gb = 7.5
disk_gb = 80
framework = "pytorch"
cuda = 12.1
max_budget = 25
auto_destroy = true
"params" = "6.7B"

[other]
model = "not this one"
`

func TestLoadTaskFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vastfleet.toml")
	if err := os.WriteFile(path, []byte(sampleTOML), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := LoadTaskFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Task{
		Model: "llama2-7b", Params: 6.7, Precision: "bf16", Mode: "finetune", Optimizer: "adamw",
		BatchSize: 4, SeqLen: 2048, DatasetSize: 50000, DatasetGB: 2.5, Epochs: 3, Throughput: 12.5,
		Distributed: "none", GPUs: 1, Image: "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
		ImageGB: 7.5, DiskGB: 80, Framework: "pytorch", CUDA: 12.1, MaxBudget: 25, AutoDestroy: true,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("LoadTaskFile mismatch (-want +got):\n%s", d)
	}
	if _, err := Requirements(got); err != nil {
		t.Errorf("Requirements of the sample: %v", err)
	}
}

func TestLoadTaskFileMissing(t *testing.T) {
	if _, err := LoadTaskFile(filepath.Join(t.TempDir(), "nope.toml")); !os.IsNotExist(err) {
		t.Errorf("err = %v, want not-exist", err)
	}
}

func TestParseTaskErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"no task section", "[fleet]\nname = \"x\"\n", "f.toml: no [task] section"},
		{"unknown key", "[task]\nmodel = \"7b\"\nmodle = \"7b\"\n", `f.toml:3: unknown key "modle" in [task]`},
		{"string for a number", "[task]\nepochs = \"three\"\n", `f.toml:2: key "epochs": want a number, got "three"`},
		{"number for a string", "[task]\nmodel = 7\n", `f.toml:2: key "model": want a string, got 7`},
		{"fraction for an int", "[task]\nbatch_size = 2.5\n", `f.toml:2: key "batch_size": want a whole number, got 2.5`},
		{"bad bool", "[task]\nfull = yes\n", `f.toml:2: key "full": bad value "yes"`},
		{"unterminated string", "[task]\nmodel = \"7b\n", `f.toml:2: key "model": unterminated string`},
		{"junk after value", "[task]\nmodel = \"7b\" extra\n", `f.toml:2: key "model": unexpected "extra" after value`},
		{"duplicate key", "[task]\nmodel = \"7b\"\n\nmodel = \"13b\"\n", `f.toml:4: key "model": already set on line 2`},
		{"no equals", "[task]\nmodel\n", `f.toml:2: want key = value`},
		{"missing value", "[task]\nmodel =\n", `f.toml:2: key "model": missing value`},
		{"array in task", "[task]\nmodel = [\"7b\"]\n", `f.toml:2: key "model": arrays and tables are not supported`},
		{"bad params", "[task]\nparams = \"lots\"\n", `f.toml:2: key "params": bad parameter count "lots"`},
		{"bad header", "[task\n", `f.toml:1: bad section header`},
		{"two task sections", "[task]\n[task]\n", `f.toml:2: second [task] section`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTask(strings.NewReader(tc.text), "f.toml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseTaskEscapesAndComments(t *testing.T) {
	got, err := ParseTask(strings.NewReader("[task] # the task\nimage = \"a\\\"b#c\" # comment\nhours = 1e1\n"), "f")
	if err != nil {
		t.Fatal(err)
	}
	if got.Image != `a"b#c` || got.Hours != 10 {
		t.Errorf("got image %q hours %v", got.Image, got.Hours)
	}
}
