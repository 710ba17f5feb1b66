package fleet

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// slowListing is a marketplace whose account listing takes until its
// caller gives up (40 pages at 1,000 instances on a loaded machine), and
// whose answer for one instance is quick.
type slowListing struct {
	provider.Provider
	lists, shows atomic.Int64
}

func (p *slowListing) ListInstances(ctx context.Context) (provider.Listing, error) {
	p.lists.Add(1)
	<-ctx.Done()
	return provider.Listing{}, ctx.Err()
}

func (p *slowListing) ShowInstance(_ context.Context, id int64) (provider.Instance, error) {
	p.shows.Add(1)
	return provider.Instance{ID: id, MachineID: 7, ImageUUID: "img"}, nil
}

// An enrollment never waits for the account's listing: with one slow to
// come, every enrolling instance is answered from the marketplace's answer
// for it alone, and at most one listing is under way. Enrollments waiting
// on the listing held 20,000 connections at 1,000 nodes.
func TestEnrollmentCheckDoesNotWaitForTheListing(t *testing.T) {
	t.Parallel()
	p := &slowListing{}
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	for id := int64(1); id <= 20; id++ {
		if err := st.UpsertInstance(ctx, store.Instance{ID: id, Fleet: "big", State: provider.StateRunning}, now); err != nil {
			t.Fatal(err)
		}
	}
	m := &Membership{Store: func(context.Context) (*store.Store, error) { return st, nil },
		Provider: func(context.Context) (provider.Provider, error) { return p, nil }, Log: slog.New(slog.DiscardHandler)}
	for id := int64(1); id <= 20; id++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		in, ok, err := m.Instance(cctx, "big", id)
		cancel()
		if err != nil || !ok || in.MachineID != 7 {
			t.Fatalf("instance %d: %+v %v %v", id, in, ok, err)
		}
	}
	if _, ok, err := m.Instance(ctx, "other", 3); ok || err != nil {
		t.Errorf("an instance of another fleet was let in (%v)", err)
	}
	if got := p.lists.Load(); got > 1 {
		t.Errorf("%d listings under way for 20 enrollments, want at most 1", got)
	}
	if got := p.shows.Load(); got != 20 {
		t.Errorf("%d shows, want 20", got)
	}
}
