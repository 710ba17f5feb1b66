//go:build !unix

package agent

// diskUsage is unknown off unix: the agent runs on linux nodes, and builds
// elsewhere only for the simulator's machines.
func diskUsage(string) (used, total int64) { return 0, 0 }
