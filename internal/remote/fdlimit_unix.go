//go:build unix

package remote

import "syscall"

// raiseFileLimit raises the soft open-file limit to the hard one and
// returns the limit in force.
func raiseFileLimit() (uint64, bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
			syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
		}
	}
	return uint64(lim.Cur), true
}
