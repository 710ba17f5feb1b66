package cli

import (
	"context"
	"errors"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

var _ coord.InstanceChecker = fleetMembership{}

// fleetMembership is the coordinator's membership check: an instance
// belongs to a fleet when the store records it there, not gone nor being
// destroyed, and the marketplace shows it. The machine and image come from
// the marketplace, which the host cannot change.
type fleetMembership struct{ f *factory }

// Instances answers for the whole fleet (the revocation sweep). The store
// is read every time, so an instance vastfleet destroys loses its
// credential at the next sweep (every revokeEvery). The listing, the
// marketplace's costliest read (25 rows a page, about one call a second
// allowed), is kept for membersListingTTL; an instance enrolled since was
// shown alone (Instance) and joins it.
func (m fleetMembership) Instances(ctx context.Context, fleetName string) (map[int64]coord.Instance, error) {
	f := m.f
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return nil, err
	}
	live, err := st.Instances(ctx, store.InstanceFilter{Fleet: fleetName})
	if err != nil {
		return nil, err
	}
	if err := f.refreshMembersListing(ctx); err != nil {
		return nil, err
	}
	f.members.mu.Lock()
	defer f.members.mu.Unlock()
	out := map[int64]coord.Instance{}
	for _, in := range live {
		if c, ok := f.members.byID[in.ID]; ok && in.Live() && in.DestroyRequestedAt.IsZero() {
			out[in.ID] = c
		}
	}
	return out, nil
}

// Instance answers for one enrolling instance: from the store's row and
// the cached listing, or, for an instance rented since that listing (or
// before any), the marketplace's answer for that instance alone. It never
// waits for a listing: a stale one is refreshed in the background. A
// fleet of 1,000 booting together used to list the account again for
// every instance it missed, 40 pages each time; then every enrollment
// waited on the one listing under way, past the agents' timeouts, and
// their retries held 20,000 connections open (the coordinator's open-file
// limit) until the store could not open its files.
func (m fleetMembership) Instance(ctx context.Context, fleetName string, id int64) (coord.Instance, bool, error) {
	f := m.f
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return coord.Instance{}, false, err
	}
	in, err := st.Instance(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return coord.Instance{}, false, nil
	}
	if err != nil {
		return coord.Instance{}, false, err
	}
	if in.Fleet != fleetName || !in.Live() || !in.DestroyRequestedAt.IsZero() {
		return coord.Instance{}, false, nil
	}
	f.refreshMembersListingSoon()
	f.members.mu.Lock()
	c, ok := f.members.byID[id]
	f.members.mu.Unlock()
	if ok {
		return c, true, nil
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return coord.Instance{}, false, err
	}
	row, err := p.ShowInstance(ctx, id)
	if errors.Is(err, provider.ErrNotFound) {
		return coord.Instance{}, false, nil
	}
	if err != nil {
		return coord.Instance{}, false, err
	}
	c = memberOf(row)
	f.members.mu.Lock()
	if f.members.byID == nil {
		f.members.byID = map[int64]coord.Instance{} // no listing yet: its time stays zero, so it is still stale
	}
	f.members.byID[id] = c
	f.members.mu.Unlock()
	return c, true, nil
}

// membersListingTTL is how long the membership check trusts a listing of
// the account; revokeEvery how often the coordinator sweeps credentials.
const (
	membersListingTTL = time.Minute
	revokeEvery       = 10 * time.Second
)

// membersListingFresh: the account was listed within membersListingTTL
// (entries shown one by one since do not make a listing).
func (f *factory) membersListingFresh() bool {
	f.members.mu.Lock()
	defer f.members.mu.Unlock()
	return f.members.byID != nil && time.Since(f.members.at) < membersListingTTL
}

// refreshMembersListingSoon refreshes a stale listing in the background,
// unless a refresh is already under way; the caller does not wait.
func (f *factory) refreshMembersListingSoon() {
	if f.membersListingFresh() || !f.members.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer f.members.refreshing.Store(false)
		// Bounded: nothing waits for it, and the next caller tries again.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := f.refreshMembersListing(ctx); err != nil {
			f.log.Warn("refreshing the fleet's listing for enrollments failed", "err", err)
		}
	}()
}

// refreshMembersListing lists the account again when the last listing is
// older than membersListingTTL. One caller lists; the others wait on the
// lock. A listing that fails keeps the last one.
func (f *factory) refreshMembersListing(ctx context.Context) error {
	f.members.listMu.Lock()
	defer f.members.listMu.Unlock()
	if f.membersListingFresh() {
		return nil
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return err
	}
	listing, err := p.ListInstances(ctx)
	if err != nil {
		return err
	}
	byID := make(map[int64]coord.Instance, len(listing.Instances))
	for _, in := range listing.Instances {
		byID[in.ID] = memberOf(in)
	}
	f.members.mu.Lock()
	f.members.byID, f.members.at = byID, time.Now()
	f.members.mu.Unlock()
	return nil
}

// memberOf is what the coordinator keeps of an instance the marketplace
// listed or showed.
func memberOf(in provider.Instance) coord.Instance {
	return coord.Instance{MachineID: in.MachineID, Image: in.ImageUUID,
		Advertised: wire.Capacity{Cores: in.CPUCoresEffective, RAMMB: in.CPURAM, GPUs: in.NumGPUs}}
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
