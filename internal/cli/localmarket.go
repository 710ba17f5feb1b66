package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/localmarket"
	"github.com/vastfleet/vastfleet/internal/sim"
)

type simDaemonOptions struct {
	Idle time.Duration
}

func newSimDaemonCmd(f *factory.Factory, runF func(context.Context, *simDaemonOptions) error) *cobra.Command {
	opts := &simDaemonOptions{}
	cmd := &cobra.Command{
		Use:    "daemon",
		Short:  "Hold this data dir's simulated marketplace open between commands (started by them)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return simDaemonRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Idle, "idle", localmarket.DefaultIdle, "end after this long with no command")
	limitFlags(cmd.Flags(), bounds{"idle", ">0", "720h"})
	return cmd
}

func simDaemonRun(ctx context.Context, f *factory.Factory, opts *simDaemonOptions) error {
	os.Unsetenv(factory.RunAsMainEnv) // not for the machines' processes
	dir, err := f.DataDir()
	if err != nil {
		return err
	}
	cfg, err := f.SimConfig()
	if err != nil {
		return err
	}
	pace := 1.0
	if f.Settings().Paced {
		pace = f.Opts.SimSpeed
	}
	err = localmarket.Serve(ctx, localmarket.Options{Dir: filepath.Join(dir, "sim"), Config: cfg, Pace: pace, Idle: opts.Idle, Log: f.Log,
		Settings: localmarket.Settings{Faults: f.Opts.SimFaults, Liars: cfg.Faults.Liars, Spoof: cfg.Faults.Spoof, EndpointLimits: cfg.Faults.EndpointLimits}})
	if errors.Is(err, sim.ErrInUse) {
		return fmt.Errorf("another process has this data dir's market open: %w", err)
	}
	return err
}

type simStopOptions struct{}

func newSimStopCmd(f *factory.Factory, runF func(context.Context, *simStopOptions) error) *cobra.Command {
	opts := &simStopOptions{}
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop this data dir's local simulated marketplace (it saves; the next command starts it again)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return simStopRun(cmd.Context(), f, opts)
		},
	}
}

func simStopRun(ctx context.Context, f *factory.Factory, _ *simStopOptions) error {
	dir, err := f.DataDir()
	if err != nil {
		return err
	}
	was, err := localmarket.Stop(ctx, filepath.Join(dir, "sim"))
	if err != nil {
		return err
	}
	if !was {
		fmt.Fprintln(f.IO.ErrOut, "no local market is running for", dir)
		return nil
	}
	fmt.Fprintln(f.IO.ErrOut, "stopped the local market for", dir)
	return nil
}
