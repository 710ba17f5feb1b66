package cli

import (
	"context"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// withAgent makes every instance of the launch run the agent
// (factory.WithAgents), reporting to --coord.
func withAgent(ctx context.Context, f *factory.Factory, spec *launch.Spec, o *launchOptions) error {
	if o.OrphanPolicy != wire.PolicyStop && o.OrphanPolicy != wire.PolicyDestroy {
		return usagef("--orphan-policy %q: use stop or destroy", o.OrphanPolicy)
	}
	return f.WithAgents(ctx, spec, factory.Agents{Coord: o.Coord, CoordSHA256: o.CoordSHA256, Items: o.Items,
		OrphanAfter: o.OrphanAfter, OrphanPolicy: o.OrphanPolicy, Ladder: o.Ladder, Onstart: o.Onstart, OnShortHardware: o.OnShortHardware})
}
