package launch

import (
	"time"
)

// Strategies the benchmark compares.
const (
	StrategyStartAllWait = "start-all-wait" // rent Count, wait for the deadline, destroy what is not running
	StrategyManualPark   = "manual-park"    // rent Count, park each as it boots, release at the deadline
	StrategyVastfleet    = "vastfleet"      // what `vastfleet launch --park` does by default
)

// BenchSpec is the launch spec each strategy runs. Every strategy rents
// the CLI's default image and disk; vastfleet's is exactly the spec of
// `vastfleet launch --count N --deadline D --park`, and the two recipes
// are that spec without backfill, spares or a budget (rent Count once).
func BenchSpec(strategy string, count int, deadline time.Duration) Spec {
	s := DefaultSpec("bench", count, deadline, true)
	switch strategy {
	case StrategyStartAllWait:
		s.Park, s.Backfill, s.BudgetAuto = false, false, false
	case StrategyManualPark:
		s.Backfill, s.BudgetAuto = false, false
	}
	return s
}
