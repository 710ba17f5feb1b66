package fleet

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

var _ coord.InstanceChecker = (*Membership)(nil)

// MembersListingTTL is how long the membership check trusts a listing of
// the account; RevokeEvery how often the coordinator sweeps credentials.
const (
	MembersListingTTL = time.Minute
	RevokeEvery       = 10 * time.Second
)

// Membership is the coordinator's membership check: an instance belongs
// to a fleet when the store records it there, not gone nor being
// destroyed, and the marketplace shows it. The machine and image come from
// the marketplace, which the host cannot change. Store and Provider are
// asked at every check, as the store may be reopened between them.
type Membership struct {
	Store    func(context.Context) (*store.Store, error)
	Provider func(context.Context) (provider.Provider, error)
	Log      *slog.Logger

	// listMu lets one caller list; refreshing marks a background refresh
	// under way; byID and at are the last listing, under mu.
	listMu, mu sync.Mutex
	refreshing atomic.Bool
	byID       map[int64]coord.Instance
	at         time.Time
}

// Instances answers for the whole fleet (the revocation sweep). The store
// is read every time, so an instance vastfleet destroys loses its
// credential at the next sweep (every RevokeEvery). The listing, the
// marketplace's costliest read (25 rows a page, about one call a second
// allowed), is kept for MembersListingTTL; an instance enrolled since was
// shown alone (Instance) and joins it.
func (m *Membership) Instances(ctx context.Context, fleetName string) (map[int64]coord.Instance, error) {
	st, err := m.Store(ctx)
	if err != nil {
		return nil, err
	}
	live, err := st.Instances(ctx, store.InstanceFilter{Fleet: fleetName})
	if err != nil {
		return nil, err
	}
	if err := m.refreshListing(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int64]coord.Instance{}
	for _, in := range live {
		if c, ok := m.byID[in.ID]; ok && in.Live() && in.DestroyRequestedAt.IsZero() {
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
func (m *Membership) Instance(ctx context.Context, fleetName string, id int64) (coord.Instance, bool, error) {
	st, err := m.Store(ctx)
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
	m.refreshListingSoon()
	m.mu.Lock()
	c, ok := m.byID[id]
	m.mu.Unlock()
	if ok {
		return c, true, nil
	}
	p, err := m.Provider(ctx)
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
	m.mu.Lock()
	if m.byID == nil {
		m.byID = map[int64]coord.Instance{} // no listing yet: its time stays zero, so it is still stale
	}
	m.byID[id] = c
	m.mu.Unlock()
	return c, true, nil
}

// listingFresh: the account was listed within MembersListingTTL (entries
// shown one by one since do not make a listing).
func (m *Membership) listingFresh() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byID != nil && time.Since(m.at) < MembersListingTTL
}

// refreshListingSoon refreshes a stale listing in the background, unless
// a refresh is already under way; the caller does not wait.
func (m *Membership) refreshListingSoon() {
	if m.listingFresh() || !m.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer m.refreshing.Store(false)
		// Bounded: nothing waits for it, and the next caller tries again.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := m.refreshListing(ctx); err != nil {
			m.Log.Warn("refreshing the fleet's listing for enrollments failed", "err", err)
		}
	}()
}

// refreshListing lists the account again when the last listing is older
// than MembersListingTTL. One caller lists; the others wait on the lock.
// A listing that fails keeps the last one.
func (m *Membership) refreshListing(ctx context.Context) error {
	m.listMu.Lock()
	defer m.listMu.Unlock()
	if m.listingFresh() {
		return nil
	}
	p, err := m.Provider(ctx)
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
	m.mu.Lock()
	m.byID, m.at = byID, time.Now()
	m.mu.Unlock()
	return nil
}

// memberOf is what the coordinator keeps of an instance the marketplace
// listed or showed.
func memberOf(in provider.Instance) coord.Instance {
	return coord.Instance{MachineID: in.MachineID, Image: in.ImageUUID,
		Advertised: wire.Capacity{Cores: in.CPUCoresEffective, RAMMB: in.CPURAM, GPUs: in.NumGPUs, DownMbps: in.InetDown}}
}
