package provider

// The marketplace's money rules, in one place for the simulator's ledger
// and for vastfleet's own cost figures alike (vast-api.md §10–11).

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
