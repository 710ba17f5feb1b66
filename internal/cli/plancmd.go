package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/rental"
)

type planOptions struct {
	File    string
	Task    plan.Task
	Params  string
	Train   bool
	Infer   bool
	Explain bool
	cmdutil.JSONFlags
	Rent    int
	Image   string
	Fleet   string
	Timeout time.Duration
	// Given names the flags the user typed: they override the task
	// file's fields.
	Given []string
}

// newPlanCmd parses into planOptions and hands them to runF (tests) or
// planRun.
func newPlanCmd(f *factory.Factory, runF func(context.Context, *planOptions) error) *cobra.Command {
	opts := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan [--model NAME | --params N] [flags]",
		Short: "From a task to three costed options (cheapest, best value, fastest), and rent one",
		Long: `Describe the task; vastfleet works out VRAM, GPU count, hours, disk and CUDA,
searches the market in tiers of cards (never one model), and prints the three
best options by estimated total cost: (boot + run hours) × $/hr + transfer,
with boot time from the image size over the host's bandwidth.

--rent N rents option N, waits until it runs and records the estimate, so
'vastfleet cost' later shows actual against estimate. A task file's [task]
section (--file vastfleet.toml) gives the same fields; flags override it.`,
		Example: `  vastfleet plan --model 7b --precision bf16 --train --hours 4
  vastfleet plan --model resnet50 --dataset 1281167 --epochs 90 --throughput 1200 --explain
  vastfleet plan --model llama2-13b --precision int4 --infer --hours 0.5 --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Train && opts.Infer {
				return usagef("--train and --infer: pick one")
			}
			opts.Given = nil
			cmd.Flags().Visit(func(fl *pflag.Flag) { opts.Given = append(opts.Given, fl.Name) })
			return run(cmd, f, opts, runF, planRun)
		},
	}
	fl := cmd.Flags()
	t := &opts.Task
	fl.StringVar(&opts.File, "file", "", "read the task from the [task] section of a vastfleet.toml")
	fl.StringVar(&t.Model, "model", "", "model: 7b, 13b, 70b, llama2-7b, mistral-7b, resnet50, vit-b, bert-base, whisper-large, ...")
	fl.StringVar(&opts.Params, "params", "", "parameter count instead of a model name (6.7e9, 7B, 350M)")
	fl.StringVar(&t.Precision, "precision", "", "fp32, fp16, bf16, int8 or int4 (default fp16)")
	fl.StringVar(&t.Mode, "mode", "", "train, finetune or inference (default finetune)")
	fl.BoolVar(&opts.Train, "train", false, "training (fine-tune); same as --mode finetune")
	fl.BoolVar(&opts.Infer, "infer", false, "inference; same as --mode inference")
	fl.BoolVar(&t.Full, "full", false, "full fine-tune instead of LoRA")
	fl.StringVar(&t.Optimizer, "optimizer", "", "adamw (default), adam, adamw8bit, sgd, lion, adafactor")
	fl.IntVar(&t.BatchSize, "batch-size", 0, "batch size, if known")
	fl.IntVar(&t.SeqLen, "seq-len", 0, "sequence length, if known")
	fl.Float64Var(&t.DatasetSize, "dataset", 0, "dataset size in samples")
	fl.Float64Var(&t.DatasetGB, "dataset-gb", 0, "dataset size on disk, GB")
	fl.Float64Var(&t.Epochs, "epochs", 0, "epochs (default 1)")
	fl.Float64Var(&t.Throughput, "throughput", 0, "samples per second on one RTX 3090")
	fl.Float64Var(&t.Hours, "hours", 0, "hours on one RTX 3090, if you know it")
	fl.StringVar(&t.Distributed, "distributed", "", "ddp, fsdp, deepspeed or none")
	fl.IntVar(&t.GPUs, "gpus", 0, "at least this many GPUs")
	fl.StringVar(&opts.Image, "image", "", "docker image to run")
	fl.Float64Var(&t.ImageGB, "image-size", 0, "docker image size in GB (boot time depends on it; default 8)")
	fl.Float64Var(&t.DiskGB, "disk", 0, "disk GB (default: worked out, at least 50)")
	fl.StringVar(&t.Framework, "framework", "", "pytorch (default), pytorch1, tensorflow, jax")
	fl.Float64Var(&t.CUDA, "cuda", 0, "minimum CUDA version")
	fl.Float64Var(&t.MaxBudget, "max-budget", 0, "dollars for the whole run: options above it are flagged and --rent refuses")
	fl.BoolVar(&opts.Explain, "explain", false, "show the reasoning behind every requirement")
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print JSON")
	fl.IntVar(&opts.Rent, "rent", 0, "rent option N (1-3), wait until it runs and record its estimate")
	fl.StringVar(&opts.Fleet, "fleet", "default", "with --rent: fleet to record the instance in")
	fl.DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "with --rent: give up waiting for running after this long")
	limitFlags(fl,
		bounds{"batch-size", "0", "10000000"}, bounds{"seq-len", "0", "10000000"},
		bounds{"dataset", "0", "1e15"}, bounds{"dataset-gb", "0", "1000000"}, bounds{"epochs", "0", "1000000"},
		bounds{"throughput", "0", "1e9"}, bounds{"hours", "0", "100000"}, bounds{"gpus", "0", "1024"},
		bounds{"image-size", "0", "10000"}, bounds{"disk", "0", "100000"}, bounds{"cuda", "0", "100"},
		bounds{"max-budget", "0", "1e9"}, bounds{"rent", "0", "3"}, bounds{"timeout", "0", "720h"})
	// The market moves while --rent waits for the boot.
	return withNeeds(f, cmd, func([]string) factory.Needs { return factory.Needs{WaitsOnMarket: opts.Rent > 0} })
}

// planRun is `plan` once its flags are parsed.
func planRun(ctx context.Context, f *factory.Factory, opts *planOptions) error {
	task, req, err := plan.Input{File: opts.File, Flags: opts.Task, Given: opts.Given, Params: opts.Params,
		Train: opts.Train, Infer: opts.Infer, Image: opts.Image}.Plan()
	if err != nil {
		return err
	}
	if opts.Rent < 0 || opts.Rent > 3 {
		return usagef("--rent %d: pick an option from 1 to 3", opts.Rent)
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return err
	}
	res, err := plan.Find(ctx, task, req, p.SearchOffers, f.Log)
	var nofit *plan.NoFitError
	if errors.As(err, &nofit) {
		if opts.Explain {
			fmt.Fprintln(f.IO.ErrOut, req.Explain())
		}
		return fmt.Errorf("%w; nothing was rented", err)
	}
	if err != nil {
		return err
	}
	if opts.JSON {
		if err := cmdutil.WriteJSON(opts.Out(f.IO.Out), res); err != nil {
			return err
		}
	} else {
		plan.WriteText(f.IO.Out, req, res, opts.Explain)
	}
	return planRent(ctx, f, opts, task, req, res)
}

// planRent rents the option picked with --rent, or asked for on a
// terminal, if any.
func planRent(ctx context.Context, f *factory.Factory, opts *planOptions, task plan.Task, req plan.Req, res plan.Result) error {
	pick := opts.Rent
	if pick == 0 && f.IO.InTTY && f.IO.OutTTY && !opts.JSON && len(res.Options) > 0 {
		pick = f.IO.Pick(len(res.Options))
	}
	if pick == 0 {
		return nil
	}
	if pick > len(res.Options) {
		return usagef("--rent %d: only %d option(s) were found", pick, len(res.Options))
	}
	if res.OverBudget {
		return usagef("every option costs more than --max-budget $%.2f: nothing rented (raise the budget, shorten the task or quantize)", task.MaxBudget)
	}
	return rentOption(ctx, f, opts, req, res.Options[pick-1])
}

func rentOption(ctx context.Context, f *factory.Factory, opts *planOptions, req plan.Req, o plan.Option) error {
	m, err := f.Manager(ctx, factory.HolderName("plan", "--rent", strconv.Itoa(o.Rank)))
	if err != nil {
		return err
	}
	return rental.RentPlanned(ctx, m, rental.PlannedRental{Fleet: opts.Fleet, Image: opts.Task.Image, Model: opts.Task.Model,
		Req: req, Option: o, Timeout: opts.Timeout}, f.IO.ErrOut)
}
