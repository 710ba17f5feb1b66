//go:build unix

package cli

import (
	"os"
	"runtime"
	"syscall"
)

// peakRSSMiB is an ended process's peak resident memory in MiB; 0 when
// unknown.
func peakRSSMiB(ps *os.ProcessState) float64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return float64(ru.Maxrss) / (1 << 20) // bytes on darwin
	}
	return float64(ru.Maxrss) / 1024 // kB on linux and the BSDs
}
