// Package procgroup starts commands in a process group (or session) of
// their own and signals the whole group, so that stopping a session, a
// simulated machine or a detached up stops everything it started: the
// shell and its children alike.
//
// Groups are a unix notion. The agent and the simulator's machines run on
// linux; on windows the CLI still builds, Own, Detach and WithTTY leave
// the command as it is, and Signal can only kill a process outright.
package procgroup

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

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

// MarkedPIDs are the processes whose environment carries an entry that
// begins with marker: a child that left its process group (setsid, a
// daemon, one adopted by init) is still found by what it inherited. None
// where there is no /proc.
func MarkedPIDs(marker string) []int {
	return PIDsWithEnv(func(entry string) bool { return strings.HasPrefix(entry, marker) })
}

// PIDsWithEnv are the processes (this one aside) with an environment
// entry that match says is theirs: one pass over /proc for any number of
// markers. None where there is no /proc.
func PIDsWithEnv(match func(entry string) bool) []int {
	var out []int
	for pid := range EnvEntries(match) {
		out = append(out, pid)
	}
	return out
}

// EnvEntries is PIDsWithEnv with, for each process, the entry that
// matched: a caller that reads /proc first and decides later can still
// tell the processes apart.
func EnvEntries(match func(entry string) bool) map[int]string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for entry := range strings.SplitSeq(string(b), "\x00") {
			if match(entry) {
				out[pid] = entry
				break
			}
		}
	}
	return out
}

// KillMarked freezes, then kills, every process MarkedPIDs finds, and
// says how many. Frozen first, none sees another die and acts on it. A
// process forked between a pass's reading of /proc and its kill is found
// by the next: passes repeat, up to killPasses, until one finds none.
func KillMarked(marker string) int {
	killed := 0
	for range killPasses {
		n := KillAll(MarkedPIDs(marker))
		if n == 0 {
			break
		}
		killed += n
	}
	return killed
}

// killPasses bounds KillMarked: a process just killed may still show its
// environment for a moment.
const killPasses = 5

// KillAll freezes, then kills, every process of pids, and says how many.
func KillAll(pids []int) int {
	for _, sig := range []syscall.Signal{SIGSTOP, syscall.SIGKILL} {
		for _, pid := range pids {
			Signal(pid, sig)
		}
	}
	return len(pids)
}
