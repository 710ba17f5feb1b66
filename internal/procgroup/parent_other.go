//go:build !linux

package procgroup

import "os/exec"

// EndWithParent: only linux can tie a child's life to its parent's; here
// the child outlives a parent that is killed outright.
func EndWithParent(*exec.Cmd) {}
