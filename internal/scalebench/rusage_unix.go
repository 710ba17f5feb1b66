//go:build unix

package scalebench

import (
	"os"
	"runtime"
	"syscall"
)

// PeakRSS is an ended process's peak resident memory in bytes as its
// rusage says (0: unknown). Where the process was started with the
// parent's memory mapped (vfork), the figure is at least the parent's.
func PeakRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss) // bytes on darwin
	}
	return int64(ru.Maxrss) << 10 // kB on linux and the BSDs
}

// fdLimit is the open-file limit this process's children start with
// (soft, hard); 0 when unknown.
func fdLimit() (uint64, uint64) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, 0
	}
	return uint64(l.Cur), uint64(l.Max)
}
