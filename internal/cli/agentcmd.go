package cli

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/agent"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// newAgentCmd runs the on-instance agent from this binary, for
// coordinators that serve it when no small vastfleet-agent binary is at
// hand; the onstart starts either as `… agent`.
func newAgentCmd(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "agent",
		Short: "Run the on-instance agent (configured by VASTFLEET_* environment variables; started by the onstart)",
		Long: `Run the agent that every instance of a fleet runs: it supervises the
node's sessions, reports heartbeats and findings to the coordinator, and
stops or destroys its own instance when the coordinator has been silent for
VASTFLEET_ORPHAN_AFTER (the dead-man switch). The onstart that launch
--coord writes starts it; there is no reason to run it by hand.

Exit status: 0 stopped, 2 bad configuration, 3 the dead-man switch acted.`,
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := agent.FromEnv(f.IO.Getenv)
			if err != nil {
				return usageError{err}
			}
			err = agent.Run(cmd.Context(), cfg, slog.New(slog.NewTextHandler(f.IO.ErrOut, nil)))
			if agent.StoppedItself(err) {
				return usage.Partial{Err: err} // exit 3, as vastfleet-agent
			}
			return err
		},
	}
}
