//go:build !unix

package scalebench

import "os"

// PeakRSS is not known off unix: 0.
func PeakRSS(*os.ProcessState) int64 { return 0 }

func fdLimit() (uint64, uint64) { return 0, 0 }
