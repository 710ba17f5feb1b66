//go:build !unix

package cli

import "os"

// peakRSSMiB is unknown off unix.
func peakRSSMiB(*os.ProcessState) float64 { return 0 }
