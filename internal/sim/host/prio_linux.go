package host

import "syscall"

// raiseThreadPriority raises the calling OS thread's priority where the
// process may (root), so that it runs on a loaded computer.
func raiseThreadPriority() {
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), -10)
}
