package plan

import (
	"errors"
	"fmt"

	"github.com/vastfleet/vastfleet/internal/usage"
)

// Input is a task as the command line gives it: flags, and a task file
// whose fields the flags the user typed override.
type Input struct {
	// File is a vastfleet.toml whose [task] section is the base; "" none.
	File string
	// Flags holds the fields the flags set.
	Flags Task
	// Given names the flags the user typed.
	Given []string
	// Params is --params as typed ("6.7e9", "7B").
	Params string
	// Train and Infer set the mode; both is refused.
	Train, Infer bool
	// Image overrides the task's image when set.
	Image string
}

// Task resolves the input into one task. Every error is the user's input.
func (in Input) Task() (Task, error) {
	t := in.Flags
	if in.File != "" {
		base, err := LoadTaskFile(in.File)
		if err != nil {
			return Task{}, err
		}
		// Flags the user set override the file.
		for _, name := range in.Given {
			overlayTaskFlag(&base, &t, name)
		}
		t = base
	}
	if in.Params != "" {
		p, err := ParseParams(in.Params)
		if err != nil {
			return Task{}, fmt.Errorf("--params: %v", err)
		}
		t.Params = p
	}
	switch {
	case in.Train && in.Infer:
		return Task{}, errors.New("--train and --infer: pick one")
	case in.Train:
		t.Mode = "finetune"
	case in.Infer:
		t.Mode = "inference"
	}
	if in.Image != "" {
		t.Image = in.Image
	}
	if t.Model == "" && t.Params == 0 {
		return Task{}, errors.New("say what to run: --model NAME (7b, 13b, 70b, resnet50, ...) or --params COUNT, or --file vastfleet.toml")
	}
	return t, nil
}

// overlayTaskFlag copies the field behind flag name from the flags' task to
// the file's task: a flag the user typed wins over the file.
func overlayTaskFlag(dst, src *Task, name string) {
	switch name {
	case "model":
		dst.Model = src.Model
	case "precision":
		dst.Precision = src.Precision
	case "mode":
		dst.Mode = src.Mode
	case "full":
		dst.Full = src.Full
	case "optimizer":
		dst.Optimizer = src.Optimizer
	case "batch-size":
		dst.BatchSize = src.BatchSize
	case "seq-len":
		dst.SeqLen = src.SeqLen
	case "dataset":
		dst.DatasetSize = src.DatasetSize
	case "dataset-gb":
		dst.DatasetGB = src.DatasetGB
	case "epochs":
		dst.Epochs = src.Epochs
	case "throughput":
		dst.Throughput = src.Throughput
	case "hours":
		dst.Hours = src.Hours
	case "distributed":
		dst.Distributed = src.Distributed
	case "gpus":
		dst.GPUs = src.GPUs
	case "image-size":
		dst.ImageGB = src.ImageGB
	case "disk":
		dst.DiskGB = src.DiskGB
	case "framework":
		dst.Framework = src.Framework
	case "cuda":
		dst.CUDA = src.CUDA
	case "max-budget":
		dst.MaxBudget = src.MaxBudget
	}
}

// Plan is the task in asks for and what it needs; a task refused either
// way is the user's input (usage.Error).
func (in Input) Plan() (Task, Req, error) {
	t, err := in.Task()
	if err != nil {
		return Task{}, Req{}, usage.Error{Err: err}
	}
	r, err := Requirements(t)
	if err != nil {
		return t, Req{}, usage.Error{Err: err}
	}
	return t, r, nil
}
