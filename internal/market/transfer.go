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

// ExtractSeconds is how long a host whose disk writes diskMBps takes to
// unpack a pulled image of gb compressed GB: layers unpack to about 2.2×
// their size, written as many small files at a sixth of the disk's
// sequential MB/s, and no faster than one core decompresses (about 100
// MB/s). On a fast link this, not the download, is what a multi-GB image
// waits for (market-facts.md).
// A disk_bw of 0 (not reported) is taken as a typical host's
// UnknownDiskMBps.
func ExtractSeconds(gb, diskMBps float64) float64 {
	if diskMBps <= 0 {
		diskMBps = UnknownDiskMBps
	}
	return max(gb, 0) * 2200 / math.Min(100, math.Max(diskMBps, 6)/6)
}

// UnknownDiskMBps is the disk speed assumed for a host that reports none.
const UnknownDiskMBps = 600

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
