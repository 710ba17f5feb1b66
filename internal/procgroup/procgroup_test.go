//go:build unix

package procgroup

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A shell and the child it started are both ended by one Kill of the
// group: the child does not outlive its session.
func TestKillEndsTheWholeGroup(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
	Own(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	child, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("child pid %q: %v", buf[:n], err)
	}
	if err := Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The child is gone once its parent's group is: a signal 0 finds no
	// process (or only a zombie awaiting its reaper, init, for a moment).
	for range 1000 {
		if err := Signal(child, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if st, _ := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(child)).Output(); strings.HasPrefix(strings.TrimSpace(string(st)), "Z") {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the group's child %d outlived Kill", child)
}
