package cli

import (
	"context"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/store"
)

// fleetMembers is the coordinator's membership check: an instance belongs
// to a fleet when the store records it there, not gone nor being
// destroyed, and the marketplace's listing of the account shows it. The
// machine and image come from the listing, which the host cannot change.
func (f *factory) fleetMembers(ctx context.Context, fleetName string) (map[int64]coord.Instance, error) {
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return nil, err
	}
	live, err := st.Instances(ctx, store.InstanceFilter{Fleet: fleetName})
	if err != nil {
		return nil, err
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, err
	}
	listing, err := p.ListInstances(ctx)
	if err != nil {
		return nil, err
	}
	ours := map[int64]bool{}
	for _, in := range live {
		if in.Live() && in.DestroyRequestedAt.IsZero() {
			ours[in.ID] = true
		}
	}
	out := map[int64]coord.Instance{}
	for _, in := range listing.Instances {
		if ours[in.ID] {
			out[in.ID] = coord.Instance{MachineID: in.MachineID, Image: in.ImageUUID}
		}
	}
	return out, nil
}

// badHosts puts the machines the coordinator caught returning wrong
// results on the store's bad-host list, for as long as a launch skips a
// machine that failed.
type badHosts struct{ f *factory }

func (b badHosts) MarkBad(ctx context.Context, machineID int64, reason string) error {
	st, err := b.f.Store(ctx, false, "")
	if err != nil {
		return err
	}
	now := b.f.Clock().Now()
	return st.MarkBadHost(ctx, store.BadHost{MachineID: machineID, Reason: "wrong results: " + reason,
		FailedAt: now, Until: now.Add(max(launch.DefaultBadHostTTL, 7*24*time.Hour))})
}

// coordValidation is the task file's choice of checks as the coordinator
// takes it.
func coordValidation(v jobfile.Validation) coord.Validation {
	out := coord.Validation{Spot: v.SpotChecks, Verify: v.Verify}
	switch {
	case v.Adaptive:
		out.Mode = coord.ValidateAdaptive
	case v.Replicas > 0:
		out.Mode, out.Replicas, out.Quorum = coord.ValidateReplicas, v.Replicas, v.Quorum
	}
	return out
}
