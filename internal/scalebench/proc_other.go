//go:build !linux

package scalebench

// procfs: without Linux's /proc, open files, the long-lived processes'
// figures and the simulated machines' are not known (n/a).
const procfs = false

func readProc(int) (procSample, bool) { return procSample{}, false }
func resetPeak(int) bool              { return false }
func memAvailable() (int64, bool)     { return 0, false }

// hostTracker: the machines' processes are not followed.
type hostTracker struct{}

func newHostTracker(int, string) *hostTracker   { return &hostTracker{} }
func (*hostTracker) sample() (treeSample, bool) { return treeSample{}, false }
