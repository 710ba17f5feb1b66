package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/bidwatch"
	"github.com/vastfleet/vastfleet/internal/factory"
)

// The bid watcher (package bidwatch): a launch or rent with bids starts a
// detached `vastfleet watch-bids` for its data dir.
// VASTFLEET_BID_WATCH=off starts none.

func newWatchBidsCmd(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:    "watch-bids",
		Short:  "List this data dir's interruptible instances every 15s while any is kept (started by launch and rent with bids)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			os.Unsetenv(factory.RunAsMainEnv)
			d, err := f.BidWatchDeps(cmd.Context())
			if err != nil {
				return err
			}
			return bidwatch.Detached(cmd.Context(), d, f.IO.ErrOut)
		},
	}
}
