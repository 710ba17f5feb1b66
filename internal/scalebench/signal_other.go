//go:build !unix

package scalebench

import "os"

// terminate: without SIGTERM, the process is killed.
var terminate = os.Kill
