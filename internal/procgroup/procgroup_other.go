//go:build !unix

package procgroup

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// Numbers as linux has them; nothing delivers them here.
const (
	sigstop = syscall.Signal(19)
	sigcont = syscall.Signal(18)
	sigusr1 = syscall.Signal(10)
	sigusr2 = syscall.Signal(12)
)

func Own(*exec.Cmd)     {}
func Detach(*exec.Cmd)  {}
func WithTTY(*exec.Cmd) {}

// kill can only end a process (not its children) where there are no
// process groups.
func kill(pid int, sig syscall.Signal) error {
	if pid < 0 {
		pid = -pid
	}
	if sig != syscall.SIGKILL && sig != syscall.SIGTERM {
		return errors.ErrUnsupported
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// GroupOf: no process groups here.
func GroupOf(int) (int, error) { return 0, errors.ErrUnsupported }
