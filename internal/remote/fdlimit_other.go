//go:build !unix

package remote

// raiseFileLimit has no limit to raise off unix: FDBudget keeps its default.
func raiseFileLimit() (uint64, bool) { return 0, false }
