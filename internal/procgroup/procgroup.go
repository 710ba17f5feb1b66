// Package procgroup starts commands in a process group (or session) of
// their own and signals the whole group, so that stopping a session, a
// simulated machine or a detached up stops everything it started: the
// shell and its children alike.
//
// Groups are a unix notion. The agent and the simulator's machines run on
// linux; on windows the CLI still builds, Own, Detach and WithTTY leave
// the command as it is, and Signal can only kill a process outright.
package procgroup

import "syscall"

// Signals that windows' syscall package lacks, for the simulator's
// machines: on unix they are the kernel's.
var (
	SIGSTOP = sigstop
	SIGCONT = sigcont
	SIGUSR1 = sigusr1
	SIGUSR2 = sigusr2
)

// Kill sends sig to every process of the group led by pgid.
func Kill(pgid int, sig syscall.Signal) error { return kill(-pgid, sig) }

// Signal sends sig to the one process pid.
func Signal(pid int, sig syscall.Signal) error { return kill(pid, sig) }
