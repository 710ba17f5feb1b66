//go:build !linux

package host

// raiseThreadPriority: only linux has per-thread priorities (and the
// cgroups the capacity model needs).
func raiseThreadPriority() {}
