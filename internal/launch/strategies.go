package launch

import (
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
)

// Strategies the benchmark compares.
const (
	StrategyStartAllWait = "start-all-wait" // rent Count, wait for the deadline, destroy what is not running
	StrategyManualPark   = "manual-park"    // rent Count, park each as it boots, release at the deadline
	StrategyVastfleet    = "vastfleet"      // park + backfill (with hedged spares) + quorum release
)

// BenchSpec is the launch spec each strategy runs.
func BenchSpec(strategy string, count int, deadline time.Duration) Spec {
	s := Spec{Fleet: "bench", Count: count, Deadline: deadline,
		Create: provider.CreateRequest{Image: "vastai/base:cuda-12", Disk: 10, Runtype: "ssh"}}
	switch strategy {
	case StrategyManualPark:
		s.Park = true
	case StrategyVastfleet:
		s.Park, s.Backfill = true, true
		// The CLI's advice for start-after-stop: stuck for more than a
		// minute or so means the GPUs are gone.
		s.ReleaseTimeout = 90 * time.Second
	}
	return s
}
