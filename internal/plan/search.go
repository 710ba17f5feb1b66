package plan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// SearchFunc is one marketplace search; the caller's provider does it, so
// the planner itself stays off the network.
type SearchFunc func(context.Context, market.Query) ([]market.Offer, error)

// SearchTiers runs one search per tier of r and merges the offers by id.
func SearchTiers(ctx context.Context, r Req, search SearchFunc, log *slog.Logger) ([]market.Offer, error) {
	seen := map[int64]bool{}
	var offers []market.Offer
	for _, tier := range Tiers(r) {
		q, warnings, err := market.Parse(tier.Query, market.ParseOptions{Order: tier.Order, Storage: r.DiskGB})
		if err != nil {
			return nil, fmt.Errorf("tier %s: %w", tier.Name, err)
		}
		for _, w := range warnings {
			log.Debug("tier query warning", "tier", tier.Name, "warning", string(w))
		}
		got, err := search(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("search tier %s: %w", tier.Name, err)
		}
		log.Debug("tier searched", "tier", tier.Name, "query", tier.Query, "offers", len(got))
		for _, o := range got {
			if !seen[o.ID] {
				seen[o.ID] = true
				offers = append(offers, o)
			}
		}
	}
	return offers, nil
}

// Find searches the tiers of r and costs the options for t. When no offer
// fits at all, the *NoFitError it returns says how far the biggest machine
// on offer is from the need.
func Find(ctx context.Context, t Task, r Req, search SearchFunc, log *slog.Logger) (Result, error) {
	offers, err := SearchTiers(ctx, r, search, log)
	if err != nil {
		return Result{}, err
	}
	res, err := Options(t, r, offers)
	var nofit *NoFitError
	if errors.As(err, &nofit) && nofit.Offers == 0 {
		if o, ok := biggestMachine(ctx, search); ok {
			nofit.Biggest = fmt.Sprintf("%d× %s", o.NumGPUs, termsafe.Line(o.GPUName))
			nofit.BiggestGPUs, nofit.BiggestCardGB = o.NumGPUs, o.GPURAM/1000 // GB as the planner's search counts them
			nofit.BiggestGB = math.Round(float64(o.NumGPUs) * o.GPURAM / 1024)
		}
	}
	return res, err
}

// biggestMachine is the offer with the most GPU memory in all, so that a
// job no machine holds is told how far off it is.
func biggestMachine(ctx context.Context, search SearchFunc) (market.Offer, bool) {
	q, _, err := market.Parse("reliability>0.95", market.ParseOptions{Order: "gpu_total_ram-", Limit: 1})
	if err != nil {
		return market.Offer{}, false
	}
	offers, err := search(ctx, q)
	if err != nil || len(offers) == 0 || offers[0].NumGPUs <= 0 {
		return market.Offer{}, false
	}
	return offers[0], true
}
