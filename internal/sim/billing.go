package sim

// The ledger's rules, from vast's billing documentation (vast-api.md §11):
// compute (dph_base, or the bid) for every second the instance holds its
// GPU; storage (storage_cost $/GB/month on the allocated disk) for every
// second its disk exists on a host that is online, stopped included;
// bandwidth per byte moved, in any state. Nothing accrues while the host
// is offline or after destroy.

// monthHours is the month storage_cost is quoted over: a twelfth of a
// 365-day year (730 h), so that $0.10/GB/month on 100 GB bills
// $0.0137/h.
const monthHours = 365 * 24 / 12.0

// storageRate is the $/hour of gb GB of disk at costPerGBMonth.
func storageRate(costPerGBMonth, gb float64) float64 {
	return costPerGBMonth * gb / monthHours
}

// accrual says what a state bills: which of the two time-based charges
// run in it. A state not listed (null, loading, stopped, exited) bills
// storage only: its disk exists, its GPU is not held. Loading pays no
// compute, as one of vast's pages says (the docs disagree; the cheaper
// reading is the one a leak would be judged by).
var accrual = map[string]struct{ compute, storage bool }{
	"running":   {true, true},
	"rebooting": {true, true}, // the GPU stays held through a reboot
	"frozen":    {true, true},
	"offline":   {false, false},
}

// billsIn reports what an instance in status accrues.
func billsIn(status string) (compute, storage bool) {
	if a, ok := accrual[status]; ok {
		return a.compute, a.storage
	}
	return false, true
}
