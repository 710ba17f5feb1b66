package launch

import (
	"context"
	"time"

	"golang.org/x/time/rate"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// FleetOps is everything the launch engine asks of the world: the
// marketplace's listing and capabilities, the instance lifecycle
// (fleet.Manager's rents, parks, releases and destroys, each recorded),
// and the fleet's records. The engine holds it, never a store, a
// provider or a manager (engine_deps_test.go holds that);
// fleet.LaunchOps is the implementation over a fleet.Manager. Rows,
// instances and intents cross it as the store's and the provider's value
// types.
type FleetOps interface {
	Market
	Lifecycle
	Records
}

// Market is what the engine asks of the marketplace itself.
type Market interface {
	// Clock is the marketplace's time: read, slept on, and told how many
	// goroutines the launch runs (clock.Virtual).
	Clock() clock.Clock
	// ListInstances is one complete listing of the account.
	ListInstances(ctx context.Context) (provider.Listing, error)
	// CanRentMany: the marketplace rents many offers in one call.
	CanRentMany() bool
	// ListRate is the pace of a paced client's calls; 0: not paced.
	ListRate() rate.Limit
	// CanChangeBid: the marketplace changes an interruptible's bid.
	CanChangeBid() bool
	ChangeBid(ctx context.Context, id int64, price float64) error
}

// Lifecycle is the instance lifecycle, each step recorded before or as
// it is sent (fleet.Manager).
type Lifecycle interface {
	// Grace is how long a new rental's absence from a listing means nothing.
	Grace() time.Duration
	Rent(ctx context.Context, req fleet.RentRequest) (store.Instance, error)
	RentMany(ctx context.Context, req fleet.BulkRentRequest) ([]fleet.BulkRent, error)
	Park(ctx context.Context, id int64) error
	ParkAll(ctx context.Context, ids []int64) (map[int64]error, bool)
	Release(ctx context.Context, id int64) error
	ReleaseAll(ctx context.Context, ids []int64) (map[int64]error, bool)
	Destroy(ctx context.Context, ids []int64) error
	DestroySent(id int64) (time.Time, bool)
	Reconcile(ctx context.Context, opts fleet.ReconcileOptions) (fleet.Report, error)
	Cost(ctx context.Context, fleetName string) (fleet.CostReport, error)
	IntentOf(ctx context.Context, row provider.Instance, label fleet.LabelParts) (store.Intent, error)
	AdoptIntent(ctx context.Context, it store.Intent, row provider.Instance, now time.Time) error
}

// Records is what the engine reads and writes of the fleet's records.
type Records interface {
	StoreID(ctx context.Context) (string, error)
	Fleet(ctx context.Context, name string) (store.Fleet, error)
	CreateFleet(ctx context.Context, f store.Fleet) error
	SaveSecret(ctx context.Context, name string, data []byte) error
	LoadSecret(ctx context.Context, name string) ([]byte, error)
	SaveLadder(ctx context.Context, fleetName string, l fleet.Ladder) error
	FleetIntents(ctx context.Context, fleetName string) ([]store.Intent, error)
	FleetInstances(ctx context.Context, fleetName string) ([]store.Instance, error)
	Instance(ctx context.Context, id int64) (store.Instance, error)
	Meta(ctx context.Context, key string) (string, error)
	SetMeta(ctx context.Context, key, value string) error
	BadHosts(ctx context.Context, now time.Time) ([]store.BadHost, error)
	MarkBadHost(ctx context.Context, h store.BadHost) error
	MarkGone(ctx context.Context, id int64, at time.Time) error
	// UpdateSeen records a listed state and address; UpdateSeenAfter
	// dates a change between the listing before (prev) and now.
	UpdateSeen(ctx context.Context, id int64, state, host string, port int, url string, now time.Time) error
	UpdateSeenAfter(ctx context.Context, id int64, state, host string, port int, url string, prev, now time.Time) error
	RecordBandwidth(ctx context.Context, reports []store.BandwidthReport, now time.Time) error
	ChangeRates(ctx context.Context, id int64, dphTotal, storageDPH float64, at time.Time) error
}

// opsOf is the engine's view of m.
func opsOf(m *fleet.Manager) FleetOps { return fleet.LaunchOps{M: m} }
