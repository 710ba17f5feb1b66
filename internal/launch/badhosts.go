package launch

import (
	"context"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/store"
)

// BadHosts puts the machines the coordinator caught returning wrong
// results on the store's bad-host list, for as long as a launch skips a
// machine that failed (at least a week). Store is asked at each mark.
type BadHosts struct {
	Store func(context.Context) (*store.Store, error)
	Clock clock.Clock
}

// MarkBad records machineID as bad for reason.
func (b BadHosts) MarkBad(ctx context.Context, machineID int64, reason string) error {
	st, err := b.Store(ctx)
	if err != nil {
		return err
	}
	now := b.Clock.Now()
	return st.MarkBadHost(ctx, store.BadHost{MachineID: machineID, Reason: "wrong results: " + reason,
		FailedAt: now, Until: now.Add(max(DefaultBadHostTTL, 7*24*time.Hour))})
}
