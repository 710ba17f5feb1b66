package fleet

import (
	"context"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// Rates is what the coordinator's dashboard shows of a fleet's cost: its
// $/hr, its spend so far and each running instance's $/hr.
func (m *Manager) Rates(ctx context.Context, fleetName string) (dph, spent float64, perInstance map[int64]float64, err error) {
	rep, err := m.Cost(ctx, fleetName)
	if err != nil {
		return 0, 0, nil, err
	}
	live, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: fleetName})
	if err != nil {
		return 0, 0, nil, err
	}
	per := map[int64]float64{}
	for _, in := range live {
		if in.State == provider.StateRunning {
			per[in.ID] = in.DPHTotal
		}
	}
	for _, fc := range rep.Fleets {
		dph += fc.DPH
	}
	return dph, rep.Total, per, nil
}
