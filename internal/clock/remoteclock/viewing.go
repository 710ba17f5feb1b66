package remoteclock

import (
	"context"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
)

// Viewing is the simulated market's now for a command that only reads
// its store: the clock of the process that serves it (at url; "" when
// none does), else the last time the store saw the market (lastSeen: its
// time stands still while no process has it open), else wall time.
func Viewing(ctx context.Context, url string, lastSeen func() (time.Time, error)) clock.Clock {
	if url != "" {
		if c, err := New(ctx, url); err == nil {
			return c
		}
	}
	if at, err := lastSeen(); err == nil && !at.IsZero() {
		return clock.Fixed{At: at}
	}
	return clock.Wall{}
}
