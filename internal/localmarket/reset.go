package localmarket

import (
	"context"

	"github.com/vastfleet/vastfleet/internal/sim"
)

// Reset starts the simulated market kept in dir afresh (sim.Reset). A
// local market serving it holds the state open: it saves and ends first.
func Reset(ctx context.Context, dir string) error {
	if _, err := Stop(ctx, dir); err != nil {
		return err
	}
	return sim.Reset(dir)
}
