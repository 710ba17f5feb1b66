package cli

import (
	"context"

	"github.com/vastfleet/vastfleet/internal/bootstrap"
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// withAgent makes every instance of the launch run the agent: the onstart
// installs it from the coordinator, and the sessions run under it instead
// of tmux, reporting to the coordinator.
func withAgent(ctx context.Context, f *factory.Factory, spec *launch.Spec, o *launchOptions) error {
	if o.OrphanPolicy != wire.PolicyStop && o.OrphanPolicy != wire.PolicyDestroy {
		return usagef("--orphan-policy %q: use stop or destroy", o.OrphanPolicy)
	}
	dir, err := f.DataDir()
	if err != nil {
		return err
	}
	sessions, items, err := launch.AgentWork(spec.Sessions, o.Items)
	if err != nil {
		return err
	}
	agent, err := coord.Join(ctx, coord.Joining{Dir: dir, Coord: o.Coord, CoordSHA256: o.CoordSHA256, Fleet: spec.Fleet,
		Remote: f.Opts.Market == "vast", OrphanAfter: o.OrphanAfter, OrphanPolicy: o.OrphanPolicy, Items: items})
	if err != nil {
		return err
	}
	scale := 0.0
	if f.Opts.Market == "sim" {
		// The agents' timers run in the market's time: ask the market
		// (usually the one the coordinator holds) for its scale.
		if _, err := f.Provider(ctx); err != nil {
			return err
		}
		scale = f.SimScale()
	}
	agent.Sessions, agent.TimeScale = sessions, scale
	agent.MaxLifetime, agent.IdleAfter, agent.IdleBelow = o.Ladder.MaxLifetime, o.Ladder.IdleAfter, o.Ladder.IdleBelow
	onstart, err := bootstrap.AgentOnstart(o.Onstart, agent)
	if err != nil {
		return usageError{err}
	}
	spec.Create.Onstart = onstart
	spec.Sessions = nil // the agent runs them
	onShort, err := launch.ParseOnShort(o.OnShortHardware)
	if err != nil {
		return usageError{err}
	}
	spec.Hardware = &launch.HardwarePolicy{OnShort: onShort}
	return nil
}

// launchChecks are the launch's gates: the SSH handshake (--ready-check)
// and, with --coord, the boot probes the coordinator holds.
func launchChecks(ctx context.Context, f *factory.Factory, o *launchOptions, fleetName string) (launch.Checks, error) {
	var c launch.Checks
	if f.Opts.Market == "sim" {
		c = launch.SimulatedChecks(f.SimScale(), f.OnVirtualClock())
	}
	switch o.ReadyCheck {
	case "ssh":
		c.Usable = sshUsable
	case "", "auto":
		// The simulator's instances answer SSH only with machines behind
		// them (--sim-hosts in process); agents need them, so --coord
		// implies them. Against a `sim serve` elsewhere, pass ssh.
		if f.Opts.Market != "sim" || f.Settings().SimHosts || o.Coord != "" {
			c.Usable = sshUsable
		}
	}
	if o.Coord == "" {
		return c, nil
	}
	dir, err := f.DataDir()
	if err == nil {
		c.Agents, err = coord.FleetAgents(ctx, coord.Joining{Dir: dir, Coord: o.Coord, CoordSHA256: o.CoordSHA256, Fleet: fleetName})
	}
	return c, err
}

func sshUsable(ctx context.Context, host string, port int) error {
	return remote.Handshake(ctx, host, port, launch.DefaultUsableTimeout)
}
