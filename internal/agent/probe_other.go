//go:build !unix

package agent

import "time"

// processCPU is unknown off unix: the agent runs on linux nodes.
func processCPU() (time.Duration, bool) { return 0, false }
