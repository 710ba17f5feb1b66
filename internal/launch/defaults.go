package launch

import (
	"context"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
)

// What a launch uses when the user does not say. The CLI's flag defaults
// and the benchmark's specs both come from here, so that `bench launch`
// measures the command users run, not a hand-made cousin of it.
const (
	DefaultImage   = "pytorch/pytorch:latest"
	DefaultDisk    = 20.0
	DefaultRuntype = "ssh"
	// DefaultFilter is the published recipe's filter (market-facts.md),
	// applied when a launch is given no query: a host that pulls slower
	// than 200 Mb/s rarely boots a multi-GB image within a launch's
	// deadline, unreliable hosts fail their boots, and transfers to and
	// from CN and HK are often throttled.
	DefaultFilter = "inet_down>=200 reliability>0.95 geolocation notin [CN,HK]"
	// DefaultBy is the ranking a launch uses without --by or --score.
	DefaultBy = "vcpu"
)

// Create is the create body for image on diskGB of disk, with SSH through
// the marketplace's proxy: a launch's, and a single rental's (rent, plan).
func Create(image string, diskGB float64) provider.CreateRequest {
	return provider.CreateRequest{Image: image, Disk: diskGB, Env: map[string]string{}, Runtype: DefaultRuntype}
}

// DefaultSpec is the spec `vastfleet launch --count N --deadline D [--park]`
// builds when nothing else is given (the fleet name aside).
func DefaultSpec(name string, count int, deadline time.Duration, park bool) Spec {
	return Spec{Fleet: name, Count: count, Deadline: deadline, Park: park, Backfill: true, BudgetAuto: true,
		BootTimeout: DefaultBootTimeout, ReleaseTimeout: DefaultReleaseTimeout, BadHostTTL: DefaultBadHostTTL,
		Create: Create(DefaultImage, DefaultDisk)}
}

// DefaultQuery is the search a launch makes when given no query: the
// marketplace's default filters and DefaultFilter, on-demand prices with
// the launch's disk priced in.
func DefaultQuery(disk float64) (market.Query, error) {
	q, _, err := market.Parse(DefaultFilter, market.ParseOptions{Type: "on-demand", Storage: disk, Strict: true})
	return q, err
}

// Candidates sweeps every offer matching q from p and ranks them by s:
// the candidate list a launch is given. It returns how many searches the
// sweep took.
func Candidates(ctx context.Context, p provider.Provider, q market.Query, s market.Scorer) ([]market.Ranked, int, error) {
	q.Limit = 0
	offers, requests, err := provider.SweepOffers(ctx, p, q, provider.DefaultSweepPage)
	if err != nil {
		return nil, requests, err
	}
	ranked, err := market.RankContext(ctx, offers, s)
	return ranked, requests, err
}
