package procgroup

import (
	"os/exec"
	"syscall"
)

// EndWithParent has the kernel send cmd SIGTERM when the process that
// started it dies, however it dies (kill -9 included), so that a helper
// process in a group of its own does not outlive it.
func EndWithParent(cmd *exec.Cmd) { sysProcAttr(cmd).Pdeathsig = syscall.SIGTERM }
