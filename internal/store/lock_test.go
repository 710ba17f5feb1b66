package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

const lockChildEnv = "VASTFLEET_STORE_LOCK_CHILD"

// TestMain lets the test binary double as a child process that takes the
// lock, says so, and waits to be killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv(lockChildEnv); dir != "" {
		l, err := AcquireLock(dir, "vastfleet launch --count 300")
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		fmt.Println("locked")
		defer l.Unlock() // never runs: the parent kills us
		for {
			time.Sleep(time.Hour) // unlike select{}, never trips the deadlock detector
		}
	}
	os.Exit(m.Run())
}

func TestLockSameProcess(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	dir := t.TempDir()
	l, err := AcquireLock(dir, "vastfleet up")
	if err != nil {
		t.Fatal(err)
	}
	_, err = AcquireLock(dir, "vastfleet down")
	var le *LockedError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &le) {
		t.Fatalf("second AcquireLock = %v, want *LockedError", err)
	}
	re := regexp.MustCompile(fmt.Sprintf(`^another vastfleet \(pid %d, "vastfleet up", since \d\d:\d\d:\d\d\) holds .*/vastfleet.lock; wait for it or stop it$`, os.Getpid()))
	if !re.MatchString(err.Error()) {
		t.Errorf("error %q does not match %s", err, re)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Errorf("second Unlock = %v", err)
	}
	l2, err := AcquireLock(dir, "vastfleet down")
	if err != nil {
		t.Fatalf("after Unlock: %v", err)
	}
	l2.Unlock()
}

func TestLockOtherProcessThenStale(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("child said %q, %v", line, err)
	}

	_, err = AcquireLock(dir, "vastfleet status")
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("AcquireLock while child holds it = %v", err)
	}
	want := fmt.Sprintf(`another vastfleet (pid %d, "vastfleet launch --count 300", since `, cmd.Process.Pid)
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q\nwant prefix %q", err, want)
	}

	// SIGKILL: no cleanup runs, the file and its content stay behind, and
	// the lock must still be free.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	if b, _ := os.ReadFile(dir + "/" + LockFileName); !strings.Contains(string(b), "launch --count 300") {
		t.Errorf("stale lock file content %q, expected the dead holder's record", b)
	}
	l, err := AcquireLock(dir, "vastfleet status")
	if err != nil {
		t.Fatalf("stale lock not free: %v", err)
	}
	defer l.Unlock()
	b, _ := os.ReadFile(l.Path())
	if !strings.Contains(string(b), `"command":"vastfleet status"`) || !strings.Contains(string(b), fmt.Sprintf(`"pid":%d`, os.Getpid())) {
		t.Errorf("lock file content %q does not name us", b)
	}
}
