package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/wire"
)

type reapOptions struct {
	Fleet     string
	After     time.Duration
	Policy    string
	AfterSet  bool
	PolicySet bool
}

func newReapCmd(f *factory.Factory, runF func(context.Context, *reapOptions) error) *cobra.Command {
	opts := &reapOptions{}
	cmd := &cobra.Command{
		Use:   "reap [--fleet F]",
		Short: "Stop or destroy instances whose agent has fallen silent (the dead-man switch, from outside)",
		Long: `Stop or destroy this data dir's instances whose agent has not reported to
the coordinator for longer than the fleet's --orphan-after. A stopped or
outbid container cannot run its own dead-man switch, so vastfleet does it
from outside; the coordinator does the same while it runs.

Each fleet is reaped as it was launched (launch --coord --orphan-after and
--orphan-policy, recorded in DATA_DIR/coord.db); the flags here override.
The fleet's teardown ladder (launch --max-lifetime, --stopped-for) is
applied first: an instance past its lifetime is stopped, one stopped for
longer than --stopped-for is destroyed.
Only instances whose label names this data dir and the fleet are touched,
and only those whose agent reported at least once: silence from an agent
never heard is not evidence. Every action is logged and noted on the
instance, where ls shows it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.AfterSet = cmd.Flags().Changed("orphan-after")
			opts.PolicySet = cmd.Flags().Changed("orphan-policy")
			return run(cmd, f, opts, runF, reapRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Fleet, "fleet", "", "only this fleet (default: every fleet)")
	fl.DurationVar(&opts.After, "orphan-after", wire.DefaultOrphanAft, "silence after which an instance is reaped (default: the fleet's, as launched)")
	fl.StringVar(&opts.Policy, "orphan-policy", wire.PolicyStop, "stop or destroy (default: the fleet's, as launched)")
	limitFlags(fl, bounds{"orphan-after", "1m", "8760h"})
	return cmd
}

func reapRun(ctx context.Context, f *factory.Factory, opts *reapOptions) error {
	if opts.Policy != wire.PolicyStop && opts.Policy != wire.PolicyDestroy {
		return usagef("--orphan-policy %q: use stop or destroy", opts.Policy)
	}
	rep := fleet.Reporter{Out: f.IO.Out, ErrOut: f.IO.ErrOut}
	res, err := f.Reap(ctx, fleet.Sweep{OnLaddered: rep.Laddered, OnReaped: rep.Reaped,
		Fleet:  opts.Fleet,
		Switch: fleet.Switch{After: opts.After, Policy: opts.Policy, AfterSet: opts.AfterSet, PolicySet: opts.PolicySet},
	})
	switch {
	case err != nil:
		return err
	case res.NoCoordinator:
		fmt.Fprintln(f.IO.ErrOut, "no coordinator has run for this data dir: no agent's silence to go by")
	case res.Reaped == 0:
		fmt.Fprintln(f.IO.ErrOut, "no silent instances")
	}
	return errors.Join(res.Failed...)
}
