//go:build !unix

package scalebench

import "os"

func maxRSS(*os.ProcessState) int64 { return 0 }
func fdLimit() (uint64, uint64)     { return 0, 0 }
