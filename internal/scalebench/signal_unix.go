//go:build unix

package scalebench

import "syscall"

// terminate asks a long-lived process to stop cleanly.
var terminate = syscall.SIGTERM
