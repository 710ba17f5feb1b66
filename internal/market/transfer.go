package market

import "math"

// The bandwidth estimate, in one place for plan, launch and cost: a host
// downloads at its inet_down (Mb/s) and bills every GB in at inet_down_cost
// and every GB out at inet_up_cost ($/GB), in any state (vast-api.md §11).

// MinInetDownMbps is the floor on a host's download speed, so that a bogus
// 0 Mb/s does not divide by zero.
const MinInetDownMbps = 10

// TransferCost is what moving downGB into a host and upGB out of it costs
// at its per-GB prices.
func TransferCost(downGB, upGB, downCostPerGB, upCostPerGB float64) float64 {
	return max(downGB, 0)*max(downCostPerGB, 0) + max(upGB, 0)*max(upCostPerGB, 0)
}

// PullSeconds is how long a host at inetDownMbps takes to download gb GB
// (GB → Mb over Mb/s).
func PullSeconds(gb, inetDownMbps float64) float64 {
	return max(gb, 0) * 8000 / math.Max(inetDownMbps, MinInetDownMbps)
}

// PullCost is the estimated bandwidth charge of renting o for an image of
// imageGB: the pull, billed per GB at inet_down_cost.
func (o Offer) PullCost(imageGB float64) float64 {
	return TransferCost(imageGB, 0, o.InetDownCost, o.InetUpCost)
}
