package factory

import (
	"context"
	"time"

	"github.com/vastfleet/vastfleet/internal/bootstrap"
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// Agents is how a launch's instances run the agent (launch --coord, up).
type Agents struct {
	Coord, CoordSHA256 string // the coordinator they report to, its pin
	Items              string // work items (itemspec) for item-worker sessions
	OrphanAfter        time.Duration
	OrphanPolicy       string
	Ladder             fleet.Ladder
	Onstart            string // the user's onstart, run before the agent
	OnShortHardware    string
}

// WithAgents makes every instance of the launch run the agent: the
// onstart installs it from the coordinator, and the sessions run under it
// instead of tmux, reporting to the coordinator.
func (f *Factory) WithAgents(ctx context.Context, spec *launch.Spec, a Agents) error {
	dir, err := f.DataDir()
	if err != nil {
		return err
	}
	sessions, items, err := launch.AgentWork(spec.Sessions, a.Items)
	if err != nil {
		return err
	}
	agent, err := coord.Join(ctx, coord.Joining{Dir: dir, Coord: a.Coord, CoordSHA256: a.CoordSHA256, Fleet: spec.Fleet,
		Remote: f.Opts.Market == "vast", OrphanAfter: a.OrphanAfter, OrphanPolicy: a.OrphanPolicy, Items: items})
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
	agent.MaxLifetime, agent.IdleAfter, agent.IdleBelow = a.Ladder.MaxLifetime, a.Ladder.IdleAfter, a.Ladder.IdleBelow
	onstart, err := bootstrap.AgentOnstart(a.Onstart, agent)
	if err != nil {
		return usage.Error{Err: err}
	}
	spec.Create.Onstart = onstart
	spec.Sessions = nil // the agent runs them
	onShort, err := launch.ParseOnShort(a.OnShortHardware)
	if err != nil {
		return usage.Error{Err: err}
	}
	spec.Hardware = &launch.HardwarePolicy{OnShort: onShort}
	return nil
}

// LaunchChecks are a launch's gates: the SSH handshake (readyCheck: ssh,
// or "" and auto where the instances answer SSH) and, with a coordinator
// (coordURL), the boot probes it holds for the fleet.
func (f *Factory) LaunchChecks(ctx context.Context, readyCheck, coordURL, coordSHA256, fleetName string) (launch.Checks, error) {
	var c launch.Checks
	if f.Opts.Market == "sim" {
		c = launch.SimulatedChecks(f.SimScale(), f.OnVirtualClock())
	}
	switch readyCheck {
	case "ssh":
		c.Usable = sshUsable
	case "", "auto":
		// The simulator's instances answer SSH only with machines behind
		// them (--sim-hosts in process); agents need them, so --coord
		// implies them. Against a `sim serve` elsewhere, pass ssh.
		if f.Opts.Market != "sim" || f.simHosts || coordURL != "" {
			c.Usable = sshUsable
		}
	}
	if coordURL == "" {
		return c, nil
	}
	dir, err := f.DataDir()
	if err == nil {
		c.Agents, err = coord.FleetAgents(ctx, coord.Joining{Dir: dir, Coord: coordURL, CoordSHA256: coordSHA256, Fleet: fleetName})
	}
	return c, err
}

func sshUsable(ctx context.Context, host string, port int) error {
	return remote.Handshake(ctx, host, port, launch.DefaultUsableTimeout)
}
