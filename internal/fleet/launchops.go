package fleet

import (
	"context"
	"time"

	"golang.org/x/time/rate"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// LaunchOps is a Manager as the launch engine sees it (launch.FleetOps):
// the marketplace's listing and capabilities, the Manager's lifecycle
// steps, and the fleet's records, each one call. The engine holds this,
// never the store or the provider, so each of its effects on the world
// has one door.
type LaunchOps struct{ M *Manager }

// Clock is the Manager's clock.
func (o LaunchOps) Clock() clock.Clock { return o.M.Clock }

// ListInstances is one listing of the account.
func (o LaunchOps) ListInstances(ctx context.Context) (provider.Listing, error) {
	return o.M.P.ListInstances(ctx)
}

// CanRentMany says whether the marketplace rents many offers a call.
func (o LaunchOps) CanRentMany() bool {
	_, ok := o.M.P.(provider.BulkCreator)
	return ok
}

// ListRate is the pace of a paced client (vast.Client); 0: not paced.
func (o LaunchOps) ListRate() rate.Limit {
	if p, ok := o.M.P.(interface{ Rate() rate.Limit }); ok {
		return p.Rate()
	}
	return 0
}

// CanChangeBid says whether the marketplace changes bids.
func (o LaunchOps) CanChangeBid() bool {
	_, ok := o.M.P.(provider.Bidder)
	return ok
}

// ChangeBid sets instance id's bid, $/hr.
func (o LaunchOps) ChangeBid(ctx context.Context, id int64, price float64) error {
	return o.M.P.(provider.Bidder).ChangeBid(ctx, id, &price)
}

// Grace is how long a new rental's absence from a listing means nothing.
func (o LaunchOps) Grace() time.Duration { return o.M.grace() }

// Rent is Manager.Rent.
func (o LaunchOps) Rent(ctx context.Context, req RentRequest) (store.Instance, error) {
	return o.M.Rent(ctx, req)
}

// RentMany is Manager.RentMany.
func (o LaunchOps) RentMany(ctx context.Context, req BulkRentRequest) ([]BulkRent, error) {
	return o.M.RentMany(ctx, req)
}

// Park is Manager.Park.
func (o LaunchOps) Park(ctx context.Context, id int64) error { return o.M.Park(ctx, id) }

// ParkAll is Manager.ParkAll.
func (o LaunchOps) ParkAll(ctx context.Context, ids []int64) (map[int64]error, bool) {
	return o.M.ParkAll(ctx, ids)
}

// Release is Manager.Release.
func (o LaunchOps) Release(ctx context.Context, id int64) error { return o.M.Release(ctx, id) }

// ReleaseAll is Manager.ReleaseAll.
func (o LaunchOps) ReleaseAll(ctx context.Context, ids []int64) (map[int64]error, bool) {
	return o.M.ReleaseAll(ctx, ids)
}

// Destroy is Manager.Destroy.
func (o LaunchOps) Destroy(ctx context.Context, ids []int64) error { return o.M.Destroy(ctx, ids) }

// DestroySent is Manager.DestroySent.
func (o LaunchOps) DestroySent(id int64) (time.Time, bool) { return o.M.DestroySent(id) }

// Reconcile is Manager.Reconcile.
func (o LaunchOps) Reconcile(ctx context.Context, opts ReconcileOptions) (Report, error) {
	return o.M.Reconcile(ctx, opts)
}

// Cost is Manager.Cost.
func (o LaunchOps) Cost(ctx context.Context, fleetName string) (CostReport, error) {
	return o.M.Cost(ctx, fleetName)
}

// IntentOf is Manager.IntentOf.
func (o LaunchOps) IntentOf(ctx context.Context, row provider.Instance, label LabelParts) (store.Intent, error) {
	return o.M.IntentOf(ctx, row, label)
}

// AdoptIntent is Manager.AdoptIntent.
func (o LaunchOps) AdoptIntent(ctx context.Context, it store.Intent, row provider.Instance, now time.Time) error {
	return o.M.AdoptIntent(ctx, it, row, now)
}

// StoreID is the store's id, as rentals' labels carry it.
func (o LaunchOps) StoreID(ctx context.Context) (string, error) { return o.M.S.ID(ctx) }

// Fleet is the fleet's row.
func (o LaunchOps) Fleet(ctx context.Context, name string) (store.Fleet, error) {
	return o.M.S.GetFleet(ctx, name)
}

// CreateFleet writes a new fleet row.
func (o LaunchOps) CreateFleet(ctx context.Context, f store.Fleet) error {
	return o.M.S.CreateFleet(ctx, f)
}

// SaveSecret stores a secret by name.
func (o LaunchOps) SaveSecret(ctx context.Context, name string, data []byte) error {
	return o.M.S.SaveSecret(ctx, name, data)
}

// LoadSecret reads a secret by name.
func (o LaunchOps) LoadSecret(ctx context.Context, name string) ([]byte, error) {
	return o.M.S.LoadSecret(ctx, name)
}

// SaveLadder saves the fleet's teardown ladder.
func (o LaunchOps) SaveLadder(ctx context.Context, fleetName string, l Ladder) error {
	return SaveLadder(ctx, o.M.S, fleetName, l)
}

// FleetIntents are the fleet's rent intents.
func (o LaunchOps) FleetIntents(ctx context.Context, fleetName string) ([]store.Intent, error) {
	return o.M.S.FleetIntents(ctx, fleetName)
}

// FleetInstances are the fleet's live instances.
func (o LaunchOps) FleetInstances(ctx context.Context, fleetName string) ([]store.Instance, error) {
	return o.M.S.Instances(ctx, store.InstanceFilter{Fleet: fleetName})
}

// Instance is one instance's record.
func (o LaunchOps) Instance(ctx context.Context, id int64) (store.Instance, error) {
	return o.M.S.Instance(ctx, id)
}

// Meta reads a meta value.
func (o LaunchOps) Meta(ctx context.Context, key string) (string, error) {
	return o.M.S.GetMeta(ctx, key)
}

// SetMeta writes a meta value.
func (o LaunchOps) SetMeta(ctx context.Context, key, value string) error {
	return o.M.S.SetMeta(ctx, key, value)
}

// BadHosts are the machines on the bad-host list at now.
func (o LaunchOps) BadHosts(ctx context.Context, now time.Time) ([]store.BadHost, error) {
	return o.M.S.BadHosts(ctx, now)
}

// MarkBadHost puts a machine on the bad-host list.
func (o LaunchOps) MarkBadHost(ctx context.Context, h store.BadHost) error {
	return o.M.S.MarkBadHost(ctx, h)
}

// MarkGone records an instance gone at at.
func (o LaunchOps) MarkGone(ctx context.Context, id int64, at time.Time) error {
	return o.M.S.MarkGone(ctx, id, at)
}

// UpdateSeen records a listed state and address.
func (o LaunchOps) UpdateSeen(ctx context.Context, id int64, state, host string, port int, url string, now time.Time) error {
	return o.M.S.UpdateSeen(ctx, id, state, host, port, url, now)
}

// UpdateSeenAfter records a listed state and address, the change dated
// between the listing before (prev) and now.
func (o LaunchOps) UpdateSeenAfter(ctx context.Context, id int64, state, host string, port int, url string, prev, now time.Time) error {
	return o.M.S.UpdateSeenAfter(ctx, id, state, host, port, url, prev, now)
}

// RecordBandwidth records a listing's bandwidth figures in one transaction.
func (o LaunchOps) RecordBandwidth(ctx context.Context, reports []store.BandwidthReport, now time.Time) error {
	return o.M.S.RecordBandwidth(ctx, reports, now)
}

// ChangeRates records an instance's new rates from at.
func (o LaunchOps) ChangeRates(ctx context.Context, id int64, dphTotal, storageDPH float64, at time.Time) error {
	return o.M.S.ChangeRates(ctx, id, dphTotal, storageDPH, at)
}
