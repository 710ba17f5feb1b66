package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/localmarket"
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
			return run(cmd, f, opts, runF, simDaemonRun)
		},
	}
	cmd.Flags().DurationVar(&opts.Idle, "idle", localmarket.DefaultIdle, "end after this long with no command")
	limitFlags(cmd.Flags(), bounds{"idle", ">0", "720h"})
	return cmd
}

func simDaemonRun(ctx context.Context, f *factory.Factory, opts *simDaemonOptions) error {
	return f.ServeLocalMarket(ctx, opts.Idle)
}

type simStopOptions struct{}

func newSimStopCmd(f *factory.Factory, runF func(context.Context, *simStopOptions) error) *cobra.Command {
	opts := &simStopOptions{}
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop this data dir's local simulated marketplace (it saves; the next command starts it again)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, f, opts, runF, simStopRun)
		},
	}
}

func simStopRun(ctx context.Context, f *factory.Factory, _ *simStopOptions) error {
	return f.StopLocalMarket(ctx)
}
