package job

import (
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/jobfile"
)

// CoordValidation is the task file's choice of checks as the coordinator
// takes it.
func CoordValidation(v jobfile.Validation) coord.Validation {
	out := coord.Validation{Spot: v.SpotChecks, Verify: v.Verify}
	switch {
	case v.Adaptive:
		out.Mode = coord.ValidateAdaptive
	case v.Replicas > 0:
		out.Mode, out.Replicas, out.Quorum = coord.ValidateReplicas, v.Replicas, v.Quorum
	}
	return out
}
