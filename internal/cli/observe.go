package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// observed is the fleet as the marketplace lists it now, for commands that
// only look (ls, cost). The data dir's store is copied in one read and the
// copy is reconciled with the marketplace, so these commands show fresh
// state without taking the writer lock, without writing the store and
// without waiting for a launch in another terminal. The copy is deleted
// when the command ends; writers (and `reconcile`) record what it saw.
func (f *factory) observed(ctx context.Context) (*fleet.Manager, error) {
	live, err := f.Store(ctx, false, "")
	if err != nil {
		return nil, err
	}
	p, perr := f.Provider(ctx)
	if errors.Is(perr, sim.ErrInUse) {
		// Another process has the simulated market open and does not
		// serve it: the state last recorded, as of when it was recorded.
		fmt.Fprintf(f.io.ErrOut, "note: %v\nshowing the state last recorded\n", perr)
		asOf, err := live.LastListed(ctx)
		if err != nil {
			return nil, err
		}
		f.frozenAt = asOf
		return &fleet.Manager{S: live, Clock: clock.Fixed{At: asOf}, Log: f.log}, nil
	}
	if perr != nil {
		return nil, perr
	}
	tmp, err := os.MkdirTemp("", "vastfleet-view-")
	if err != nil {
		return nil, err
	}
	snap, err := live.Snapshot(ctx, filepath.Join(tmp, "state.db"))
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	f.closers = append(f.closers, func() error {
		err := snap.Close()
		os.RemoveAll(tmp)
		return err
	})
	m := &fleet.Manager{P: p, S: snap, Clock: f.Clock(), Log: f.log}
	return f.reconciled(ctx, m, fleet.ReconcileOptions{LookOnly: true}), nil
}
