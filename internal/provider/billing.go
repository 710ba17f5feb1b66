package provider

import "github.com/vastfleet/vastfleet/internal/market"

// The marketplace's money rules, in one place for the simulator's ledger
// and for vastfleet's own cost figures alike (vast-api.md §10–11). The
// bandwidth estimate (image pulls) is market.TransferCost, shared with plan.

// hoursPerMonth is the month vast.ai prices storage over: storage_cost is
// $ per GB per month, billed by the second as $/hour over 730 hours.
const hoursPerMonth = 730

// StorageRate is what gb GB of disk cost an hour at costPerGBMonth
// ($/GB/month, an offer's storage_cost).
func StorageRate(costPerGBMonth, gb float64) float64 { return costPerGBMonth * gb / hoursPerMonth }

// Bills says what an instance in state accrues: compute while it holds
// its GPU (running; through a reboot or a freeze the GPU stays held),
// storage while its disk exists (every state but offline; a
// loading or stopped instance pays storage only), nothing while its host
// is offline.
func Bills(state string) (compute, storage bool) {
	switch state {
	case StateRunning, StateRebooting, StateFrozen:
		return true, true
	case StateOffline:
		return false, false
	}
	return false, true
}

// BilledKBPerGB converts vast's inet_up_billed and inet_down_billed
// counters to GB. The API does not document their unit; a measurement
// against the live API (a counter advancing 1.78 M units in 380 s on a
// 1 Gb/s host) only fits kilobytes, and the per-GB prices are decimal.
// [uncertain: re-measure against a real instance when a key is at hand]
const BilledKBPerGB = 1e6

// BandwidthReported tells whether a listing row carries the marketplace's
// own bandwidth figures (prices or counters); without them vastfleet can
// only estimate.
func BandwidthReported(in Instance) bool {
	return in.InetDownCost > 0 || in.InetUpCost > 0 || in.InetDownBilled > 0 || in.InetUpBilled > 0
}

// BandwidthCharged is what the marketplace has billed an instance for
// bandwidth so far ($), from its listing row's counters and prices.
func BandwidthCharged(in Instance) float64 {
	return market.TransferCost(in.InetDownBilled/BilledKBPerGB, in.InetUpBilled/BilledKBPerGB, in.InetDownCost, in.InetUpCost)
}
