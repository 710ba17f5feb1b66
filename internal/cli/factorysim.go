package cli

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/localmarket"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// simScale is how many market seconds pass per wall second.
func (f *factory) simScale() float64 {
	switch {
	case f.simMkt != nil, f.virtual != nil: // in this process, or a session on the local market
		return f.opts.SimSpeed
	case f.simClock != nil && f.simClock.Scale() > 0:
		return f.simClock.Scale()
	}
	return 1
}

// simConfig is the in-process or local market's configuration from the
// global --sim-* flags.
func (f *factory) simConfig() (sim.Config, error) {
	faults, err := sim.Profile(f.opts.SimFaults)
	if err != nil {
		return sim.Config{}, usagef("--sim-faults: %v", err)
	}
	if f.opts.SimLiars >= 0 {
		faults.Liars = f.opts.SimLiars
	}
	if f.opts.SimSpoof >= 0 {
		faults.Spoof = f.opts.SimSpoof
	}
	faults.EndpointLimits = faults.EndpointLimits || f.opts.SimEndpointLimits
	return sim.Config{
		Seed: f.opts.SimSeed, APIKey: simAPIKey, Faults: faults, TimeScale: f.opts.SimSpeed, Log: f.log,
	}, nil
}

func (f *factory) startSim() (string, error) {
	dir, err := f.dataDir()
	if err != nil {
		return "", err
	}
	cfg, err := f.simConfig()
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
			virtual.SetPace(f.opts.SimSpeed)
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
		fmt.Fprintf(f.io.ErrOut, "vastfleet: simulated marketplace (seed %d, faults %s, virtual time: the market moves only while vastfleet waits)\n",
			f.opts.SimSeed, f.opts.SimFaults)
	} else if f.opts.SimSpeed != 1 {
		fmt.Fprintf(f.io.ErrOut, "vastfleet: simulated marketplace (seed %d, faults %s, %gx time: one simulated minute per %.3g s)\n",
			f.opts.SimSeed, f.opts.SimFaults, f.opts.SimSpeed, 60/f.opts.SimSpeed)
	}
	return h.URL, nil
}

// servedSimFile, in the simulator's directory, holds the URL where the
// process that has the market open serves it.
const servedSimFile = localmarket.URLFile

// servedSim is where another process serves this data dir's market.
func (f *factory) servedSim() (string, bool) {
	dir, err := f.dataDir()
	if err != nil {
		return "", false
	}
	return localmarket.ServedAt(filepath.Join(dir, "sim"))
}
