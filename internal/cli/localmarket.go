package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/clock/remoteclock"
	"github.com/vastfleet/vastfleet/internal/localmarket"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// RunAsMainEnv, set to 1 in a process's environment, tells a test binary
// to run vastfleet's main instead of its tests: the local market is this
// same program started again, and under `go test` this program is the
// test binary.
const RunAsMainEnv = "VASTFLEET_RUN_AS_MAIN"

// usesLocalMarket: --market sim without --api-url talks to the data
// dir's local market process (package localmarket), unless
// VASTFLEET_SIM_LOCAL=off opens the market in this command's own process
// for the command's lifetime, as before the local market.
func (f *factory) usesLocalMarket() bool {
	switch f.io.Getenv("VASTFLEET_SIM_LOCAL") {
	case "0", "off", "false":
		return false
	}
	return true
}

// connectLocal finds or starts the data dir's local market. A command
// whose outcome depends on how long it waits (launch, up) holds a
// session on its clock: the market then moves only while the command
// waits. Others read its clock. It returns the market's URL and key.
func (f *factory) connectLocal(ctx context.Context) (string, string, error) {
	dir, err := f.dataDir()
	if err != nil {
		return "", "", err
	}
	cmd, err := f.localMarketCmd(dir)
	if err != nil {
		return "", "", err
	}
	simDir := filepath.Join(dir, "sim")
	u, started, err := localmarket.Ensure(ctx, simDir, cmd)
	if err != nil {
		return "", "", err
	}
	key, err := localmarket.Key(simDir)
	if err != nil {
		return "", "", err
	}
	f.tellLocalMarket(simDir, started)
	if f.waitsOnMarket {
		s, err := remoteclock.OpenSession(ctx, u)
		if err == nil {
			f.virtual = s.Clock()
			if f.simSpeedSet {
				f.virtual.SetPace(f.opts.SimSpeed)
			}
			f.closers = append(f.closers, func() error { s.Close(); return nil })
			return u, key, nil
		}
		// A command that holds the market in its own process serves no
		// sessions: read its clock as any other served market's.
		f.log.Debug("no session on the market", "err", err)
	}
	c, err := remoteclock.New(ctx, u)
	if err != nil {
		return "", "", fmt.Errorf("reading the local market's clock: %w", err)
	}
	f.simClock = c
	return u, key, nil
}

// tellLocalMarket says so when this command started the local market,
// and warns when it asked for market settings the running one was not
// started with: they would otherwise be ignored without a word.
func (f *factory) tellLocalMarket(simDir string, started bool) {
	if !started && len(f.simSet) == 0 {
		return
	}
	s, err := localmarket.ReadSettings(simDir)
	if err != nil {
		f.log.Debug("reading the local market's settings", "err", err)
		return
	}
	if started {
		fmt.Fprintf(f.io.ErrOut, "vastfleet: started the local simulated marketplace (seed %d, faults %s, %gx time between commands; state and log in %s; `vastfleet sim stop` ends it)\n",
			s.Seed, s.Faults, s.Pace, simDir)
		if f.simSet["sim-seed"] && s.Seed != f.opts.SimSeed {
			fmt.Fprintf(f.io.ErrOut, "warning: --sim-seed %d is not applied: the saved market keeps its seed %d; `vastfleet sim reset` starts a new market\n", f.opts.SimSeed, s.Seed)
		}
		return
	}
	differ := s.NotApplied(f.simFlags(), f.simSet)
	if len(differ) > 0 {
		fmt.Fprintf(f.io.ErrOut, "warning: the local market is already running and does not apply %s; `vastfleet sim stop` ends it (the next command starts it with the new settings; `vastfleet sim reset` for a new seed)\n",
			strings.Join(differ, ", "))
	}
}

// localMarketCmd is `vastfleet sim daemon` for this data dir, with this
// command's market flags.
func (f *factory) localMarketCmd(dir string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return localmarket.DaemonCommand(exe, dir, f.simFlags(), append(os.Environ(), RunAsMainEnv+"=1")), nil
}

// simFlags are the global --sim-* flags.
func (f *factory) simFlags() localmarket.Flags {
	return localmarket.Flags{Seed: f.opts.SimSeed, Faults: f.opts.SimFaults, Liars: f.opts.SimLiars, Spoof: f.opts.SimSpoof,
		EndpointLimits: f.opts.SimEndpointLimits, Speed: f.opts.SimSpeed, SpeedSet: f.simSpeedSet}
}

type simDaemonOptions struct {
	Idle time.Duration
}

func newSimDaemonCmd(f *factory, runF func(context.Context, *simDaemonOptions) error) *cobra.Command {
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

func simDaemonRun(ctx context.Context, f *factory, opts *simDaemonOptions) error {
	os.Unsetenv(RunAsMainEnv) // not for the machines' processes
	dir, err := f.dataDir()
	if err != nil {
		return err
	}
	cfg, err := f.simConfig()
	if err != nil {
		return err
	}
	pace := 1.0
	if f.simSpeedSet {
		pace = f.opts.SimSpeed
	}
	err = localmarket.Serve(ctx, localmarket.Options{Dir: filepath.Join(dir, "sim"), Config: cfg, Pace: pace, Idle: opts.Idle, Log: f.log,
		Settings: localmarket.Settings{Faults: f.opts.SimFaults, Liars: cfg.Faults.Liars, Spoof: cfg.Faults.Spoof, EndpointLimits: cfg.Faults.EndpointLimits}})
	if errors.Is(err, sim.ErrInUse) {
		return fmt.Errorf("another process has this data dir's market open: %w", err)
	}
	return err
}

type simStopOptions struct{}

func newSimStopCmd(f *factory, runF func(context.Context, *simStopOptions) error) *cobra.Command {
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

func simStopRun(ctx context.Context, f *factory, _ *simStopOptions) error {
	dir, err := f.dataDir()
	if err != nil {
		return err
	}
	was, err := localmarket.Stop(ctx, filepath.Join(dir, "sim"))
	if err != nil {
		return err
	}
	if !was {
		fmt.Fprintln(f.io.ErrOut, "no local market is running for", dir)
		return nil
	}
	fmt.Fprintln(f.io.ErrOut, "stopped the local market for", dir)
	return nil
}
