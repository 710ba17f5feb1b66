package cli

import (
	"context"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// fleetMembers is the coordinator's membership check: an instance belongs
// to a fleet when the store records it there, not gone nor being
// destroyed, and the marketplace's listing of the account shows it. The
// machine and image come from the listing, which the host cannot change.
//
// The store is read every time, so an instance vastfleet destroys loses
// its credential at the next revocation sweep (every revokeEvery). The
// listing, the marketplace's costliest read (25 rows a page, about one
// call a second allowed), is kept for membersListingTTL and read again at
// once when an instance of the store is missing from it (one just
// enrolling).
func (f *factory) fleetMembers(ctx context.Context, fleetName string) (map[int64]coord.Instance, error) {
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return nil, err
	}
	live, err := st.Instances(ctx, store.InstanceFilter{Fleet: fleetName})
	if err != nil {
		return nil, err
	}
	ours := map[int64]bool{}
	for _, in := range live {
		if in.Live() && in.DestroyRequestedAt.IsZero() {
			ours[in.ID] = true
		}
	}
	listed, err := f.membersListing(ctx, false)
	if err != nil {
		return nil, err
	}
	for id := range ours {
		if _, ok := listed[id]; !ok {
			if listed, err = f.membersListing(ctx, true); err != nil {
				return nil, err
			}
			break
		}
	}
	out := map[int64]coord.Instance{}
	for id, in := range listed {
		if ours[id] {
			out[id] = in
		}
	}
	return out, nil
}

// membersListingTTL is how long fleetMembers trusts a listing of the
// account; revokeEvery how often the coordinator sweeps credentials.
const (
	membersListingTTL = time.Minute
	revokeEvery       = 10 * time.Second
)

// membersListing is the account's instances as the marketplace last
// listed them, read again when older than membersListingTTL or fresh.
func (f *factory) membersListing(ctx context.Context, fresh bool) (map[int64]coord.Instance, error) {
	f.members.mu.Lock()
	defer f.members.mu.Unlock()
	if !fresh && f.members.byID != nil && time.Since(f.members.at) < membersListingTTL {
		return f.members.byID, nil
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, err
	}
	listing, err := p.ListInstances(ctx)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]coord.Instance, len(listing.Instances))
	for _, in := range listing.Instances {
		byID[in.ID] = coord.Instance{MachineID: in.MachineID, Image: in.ImageUUID,
			Advertised: wire.Capacity{Cores: in.CPUCoresEffective, RAMMB: in.CPURAM, GPUs: in.NumGPUs}}
	}
	f.members.byID, f.members.at = byID, time.Now()
	return byID, nil
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
