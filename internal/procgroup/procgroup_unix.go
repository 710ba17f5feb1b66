//go:build unix

package procgroup

import (
	"os/exec"
	"syscall"
)

const (
	sigstop = syscall.SIGSTOP
	sigcont = syscall.SIGCONT
	sigusr1 = syscall.SIGUSR1
	sigusr2 = syscall.SIGUSR2
)

// Own starts cmd in a process group of its own, led by cmd itself.
func Own(cmd *exec.Cmd) { sysProcAttr(cmd).Setpgid = true }

// Detach starts cmd in a session of its own, with no controlling
// terminal: closing the user's terminal does not hang it up.
func Detach(cmd *exec.Cmd) { sysProcAttr(cmd).Setsid = true }

// WithTTY starts cmd in a session of its own whose controlling terminal
// is its stdin, a pty's tty end, as sshd does for a login.
func WithTTY(cmd *exec.Cmd) {
	a := sysProcAttr(cmd)
	a.Setsid, a.Setctty = true, true
}

func sysProcAttr(cmd *exec.Cmd) *syscall.SysProcAttr {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	return cmd.SysProcAttr
}

func kill(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

// GroupOf is the process group pid is in.
func GroupOf(pid int) (int, error) { return syscall.Getpgid(pid) }
