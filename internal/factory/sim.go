package factory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/clock/remoteclock"
	"github.com/vastfleet/vastfleet/internal/localmarket"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// SimScale is how many market seconds pass per wall second.
func (f *Factory) SimScale() float64 {
	switch {
	case f.simMkt != nil, f.virtual != nil: // in this process, or a session on the local market
		return f.Opts.SimSpeed
	case f.simClock != nil && f.simClock.Scale() > 0:
		return f.simClock.Scale()
	}
	return 1
}

// OnVirtualClock says the market runs on a virtual clock that moves only
// while this command waits (Needs.WaitsOnMarket).
func (f *Factory) OnVirtualClock() bool { return f.virtual != nil }

// SimConfig is the in-process or local market's configuration from the
// global --sim-* flags.
func (f *Factory) SimConfig() (sim.Config, error) {
	faults, err := sim.Profile(f.Opts.SimFaults)
	if err != nil {
		return sim.Config{}, usage.Errorf("--sim-faults: %v", err)
	}
	if f.Opts.SimLiars >= 0 {
		faults.Liars = f.Opts.SimLiars
	}
	if f.Opts.SimSpoof >= 0 {
		faults.Spoof = f.Opts.SimSpoof
	}
	faults.EndpointLimits = faults.EndpointLimits || f.Opts.SimEndpointLimits
	return sim.Config{
		Seed: f.Opts.SimSeed, APIKey: sim.DefaultAPIKey, Faults: faults, TimeScale: f.Opts.SimSpeed, Log: f.Log,
		CapacityScale: f.Opts.SimCapacityScale,
	}, nil
}

func (f *Factory) startSim() (string, error) {
	dir, err := f.DataDir()
	if err != nil {
		return "", err
	}
	cfg, err := f.SimConfig()
	if err != nil {
		return "", err
	}
	if f.simHosts {
		cfg.HostDir = sim.HostsDir(filepath.Join(dir, "sim"))
	}
	var virtual *clock.Virtual
	if f.waitsOnMarket {
		// A new market starts now; a saved one resumes where it was.
		virtual = clock.NewVirtual(time.Now().UTC().Truncate(time.Second))
		if f.simSpeedSet {
			virtual.SetPace(f.Opts.SimSpeed)
		}
		cfg.Clock = virtual
	}
	// Other commands meanwhile reach the market where it is served.
	h, err := localmarket.Hold(filepath.Join(dir, "sim"), cfg)
	if err != nil {
		if virtual != nil {
			virtual.Close()
		}
		return "", err
	}
	f.simMkt = h.Market
	f.virtual = virtual
	f.closers = append(f.closers, func() error {
		err := h.Close()
		if virtual != nil {
			virtual.Close()
		}
		return err
	})
	if virtual != nil {
		fmt.Fprintf(f.IO.ErrOut, "vastfleet: simulated marketplace (seed %d, faults %s, virtual time: the market moves only while vastfleet waits)\n",
			f.Opts.SimSeed, f.Opts.SimFaults)
	} else if f.Opts.SimSpeed != 1 {
		fmt.Fprintf(f.IO.ErrOut, "vastfleet: simulated marketplace (seed %d, faults %s, %gx time: one simulated minute per %.3g s)\n",
			f.Opts.SimSeed, f.Opts.SimFaults, f.Opts.SimSpeed, 60/f.Opts.SimSpeed)
	}
	return h.URL, nil
}

// servedSim is where another process serves this data dir's market.
func (f *Factory) servedSim() (string, bool) {
	dir, err := f.DataDir()
	if err != nil {
		return "", false
	}
	return localmarket.ServedAt(filepath.Join(dir, "sim"))
}

// RunAsMainEnv, set to 1 in a process's environment, tells a test binary
// to run vastfleet's main instead of its tests: the local market is this
// same program started again, and under `go test` this program is the
// test binary.
const RunAsMainEnv = "VASTFLEET_RUN_AS_MAIN"

// usesLocalMarket: --market sim without --api-url talks to the data
// dir's local market process (package localmarket), unless
// VASTFLEET_SIM_LOCAL=off opens the market in this command's own process
// for the command's lifetime, as before the local market.
func (f *Factory) usesLocalMarket() bool {
	switch f.IO.Getenv("VASTFLEET_SIM_LOCAL") {
	case "0", "off", "false":
		return false
	}
	return true
}

// connectLocal finds or starts the data dir's local market. A command
// whose outcome depends on how long it waits (launch, up) holds a
// session on its clock: the market then moves only while the command
// waits. Others read its clock. It returns the market's URL and key.
func (f *Factory) connectLocal(ctx context.Context) (string, string, error) {
	dir, err := f.DataDir()
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
				f.virtual.SetPace(f.Opts.SimSpeed)
			}
			f.closers = append(f.closers, func() error { s.Close(); return nil })
			return u, key, nil
		}
		// A command that holds the market in its own process serves no
		// sessions: read its clock as any other served market's.
		f.Log.Debug("no session on the market", "err", err)
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
func (f *Factory) tellLocalMarket(simDir string, started bool) {
	if !started && len(f.simSet) == 0 {
		return
	}
	s, err := localmarket.ReadSettings(simDir)
	if err != nil {
		f.Log.Debug("reading the local market's settings", "err", err)
		return
	}
	if started {
		fmt.Fprintf(f.IO.ErrOut, "vastfleet: started the local simulated marketplace (seed %d, faults %s, %gx time between commands; state and log in %s; `vastfleet sim stop` ends it)\n",
			s.Seed, s.Faults, s.Pace, simDir)
		if f.simSet["sim-seed"] && s.Seed != f.Opts.SimSeed {
			fmt.Fprintf(f.IO.ErrOut, "warning: --sim-seed %d is not applied: the saved market keeps its seed %d; `vastfleet sim reset` starts a new market\n", f.Opts.SimSeed, s.Seed)
		}
		return
	}
	differ := s.NotApplied(f.simFlags(), f.simSet)
	if len(differ) > 0 {
		fmt.Fprintf(f.IO.ErrOut, "warning: the local market is already running and does not apply %s; `vastfleet sim stop` ends it (the next command starts it with the new settings; `vastfleet sim reset` for a new seed)\n",
			strings.Join(differ, ", "))
	}
}

// localMarketCmd is `vastfleet sim daemon` for this data dir, with this
// command's market flags.
func (f *Factory) localMarketCmd(dir string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return localmarket.DaemonCommand(exe, dir, f.simFlags(), append(os.Environ(), RunAsMainEnv+"=1")), nil
}

// simFlags are the global --sim-* flags.
func (f *Factory) simFlags() localmarket.Flags {
	return localmarket.Flags{Seed: f.Opts.SimSeed, Faults: f.Opts.SimFaults, Liars: f.Opts.SimLiars, Spoof: f.Opts.SimSpoof,
		EndpointLimits: f.Opts.SimEndpointLimits, Speed: f.Opts.SimSpeed, SpeedSet: f.simSpeedSet, CapacityScale: f.Opts.SimCapacityScale}
}

// ServeLocalMarket is `sim daemon`: it holds this data dir's simulated
// market open between commands (localmarket.Serve) with the --sim-*
// flags, paced at --sim-speed only when it was given (else 1x, as a real
// market), until it has been idle for idle.
func (f *Factory) ServeLocalMarket(ctx context.Context, idle time.Duration) error {
	os.Unsetenv(RunAsMainEnv) // not for the machines' processes
	dir, err := f.DataDir()
	if err != nil {
		return err
	}
	cfg, err := f.SimConfig()
	if err != nil {
		return err
	}
	pace := 1.0
	if f.simSpeedSet {
		pace = f.Opts.SimSpeed
	}
	err = localmarket.Serve(ctx, localmarket.Options{Dir: filepath.Join(dir, "sim"), Config: cfg, Pace: pace, Idle: idle, Log: f.Log,
		Settings: localmarket.Settings{Faults: f.Opts.SimFaults, Liars: cfg.Faults.Liars, Spoof: cfg.Faults.Spoof, EndpointLimits: cfg.Faults.EndpointLimits,
			CapacityScale: cfg.CapacityScale}})
	if errors.Is(err, sim.ErrInUse) {
		return fmt.Errorf("another process has this data dir's market open: %w", err)
	}
	return err
}

// ResetLocalMarket starts this data dir's simulated market afresh (sim
// reset), stopping the local market first, and says what the store still
// remembers.
func (f *Factory) ResetLocalMarket(ctx context.Context) error {
	dir, err := f.DataDir()
	if err != nil {
		return err
	}
	if err := localmarket.Reset(ctx, filepath.Join(dir, "sim")); err != nil {
		return err
	}
	fmt.Fprintln(f.IO.ErrOut, "simulated market reset; the state store still remembers its instances: run `vastfleet reconcile` to mark them gone")
	return nil
}

// StopLocalMarket stops this data dir's local market (sim stop), which
// saves, and says whether one ran.
func (f *Factory) StopLocalMarket(ctx context.Context) error {
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
