package launch

import (
	"context"
	"fmt"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// Cleanup destroys every live instance of the fleet that is not running
// (parked, loading, exited, offline, ...), after reconciling the store with
// the marketplace so that "running" is current. Destroys are confirmed by
// listing (fleet.Manager.Destroy); the ids sent are returned even when the
// confirmation is still pending (the error says so). A fleet the store
// does not know is the user's mistake.
func Cleanup(ctx context.Context, m *fleet.Manager, fleetName string) ([]int64, error) {
	f := opsOf(m)
	if _, err := f.Fleet(ctx, fleetName); err != nil {
		return nil, usagef("fleet %q: not found (see `vastfleet ls`)", fleetName)
	}
	if _, err := f.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return nil, fmt.Errorf("cleanup %s: %w", fleetName, err)
	}
	ins, err := f.FleetInstances(ctx, fleetName)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, in := range ins {
		if in.State != provider.StateRunning || in.Wanted == store.WantDestroy {
			ids = append(ids, in.ID)
		}
	}
	if err := f.Destroy(ctx, ids); err != nil {
		return ids, fmt.Errorf("cleanup %s: %w", fleetName, err)
	}
	return ids, nil
}

// AfterInterrupt applies an --on-interrupt choice to a fleet whose launch
// was interrupted with "keep" (the CLI asks the user, then calls this):
// keep does nothing; destroy-unready destroys the instances that never
// booted (loading, exited, offline; parked and running ones stay, and
// --resume continues); destroy-all destroys every live instance.
func AfterInterrupt(ctx context.Context, m *fleet.Manager, fleetName, mode string) ([]int64, error) {
	f := opsOf(m)
	switch mode {
	case InterruptKeep:
		return nil, nil
	case InterruptDestroyUnready, InterruptDestroyAll:
	default:
		return nil, fmt.Errorf("interrupt mode %q: want keep, destroy-unready or destroy-all", mode)
	}
	ins, err := f.FleetInstances(ctx, fleetName)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, in := range ins {
		booted := in.State == provider.StateRunning || in.Wanted == store.WantParked && in.State == provider.StateStopped
		if mode == InterruptDestroyAll || !booted || in.Wanted == store.WantDestroy {
			ids = append(ids, in.ID)
		}
	}
	if err := f.Destroy(ctx, ids); err != nil {
		return ids, fmt.Errorf("%s %s: %w", mode, fleetName, err)
	}
	return ids, nil
}
