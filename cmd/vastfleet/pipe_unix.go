//go:build unix

package main

import "golang.org/x/sys/unix"

// outputClosed says whether stdout or stderr is a pipe whose reader has
// gone: polling a pipe's write end then reports an error.
func outputClosed() bool {
	fds := []unix.PollFd{{Fd: 1}, {Fd: 2}}
	if _, err := unix.Poll(fds, 0); err != nil {
		return false
	}
	for _, fd := range fds {
		if fd.Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			return true
		}
	}
	return false
}
