package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// TestLockSurvivesDeletedFile is issue 9's case: with the holder file
// deleted while a process holds the lock, a second process must still be
// refused, or both drive one fleet and destroy each other's instances.
func TestLockSurvivesDeletedFile(t *testing.T) {
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
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("child said %q, %v", line, err)
	}
	path := filepath.Join(dir, LockFileName)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// Round 0 finds no file; round 1 finds a new, unlocked inode at the
	// path, as a lock on the file (not the directory) would have left.
	for round := 0; round < 2; round++ {
		if round == 1 {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		l, err := AcquireLock(dir, "vastfleet launch --resume f")
		if !errors.Is(err, ErrLocked) {
			l.Unlock()
			t.Fatalf("round %d: AcquireLock after the lock file was deleted = %v, want ErrLocked", round, err)
		}
		if !strings.HasPrefix(err.Error(), "another vastfleet holds ") {
			t.Errorf("round %d: error %q; with the file gone the holder is unknown", round, err)
		}
	}
}

func TestLockFileModeIsPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	dir := t.TempDir()
	l, err := AcquireLock(dir, "vastfleet up")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	fi, err := os.Stat(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("lock file mode %v, want 0600", perm)
	}
}

// TestHeld: Held says whether a writer holds the lock, and its probe
// leaves the lock free and the holder's name in place.
func TestHeld(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	t.Parallel()
	dir := t.TempDir()
	if Held(dir) {
		t.Fatal("held before anyone took it")
	}
	l, err := AcquireLock(dir, "vastfleet up")
	if err != nil {
		t.Fatalf("after a probe: %v", err)
	}
	if !Held(dir) {
		t.Error("not held while up holds it")
	}
	if _, err := AcquireLock(dir, "vastfleet down"); err == nil || !strings.Contains(err.Error(), `"vastfleet up"`) {
		t.Errorf("after a probe of a held lock: %v, want up named as its holder", err)
	}
	l.Unlock()
	if Held(dir) {
		t.Error("held after Unlock")
	}
}

// TestCommandsWaitForABackgroundPass: a command that finds the data dir's
// lock held by a background pass (a bid watcher's listing) waits for it
// instead of failing, and gives up at its bound; held by another
// command, it is refused at once.
func TestCommandsWaitForABackgroundPass(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	const pass = "vastfleet watch-bids (listing interruptible instances)"
	passes := []string{pass, "vastfleet coord (reaping silent instances)"}
	watcher, err := AcquireLock(dir, pass)
	if err != nil {
		t.Fatal(err)
	}
	pauses := 0
	// The watcher's listing ends during the command's third wait.
	l, err := AcquireLockBehind(ctx, dir, "vastfleet destroy --all", passes, func(context.Context) (bool, error) {
		if pauses++; pauses == 3 {
			watcher.Unlock()
		}
		return true, nil
	})
	if err != nil || pauses != 3 {
		t.Fatalf("a command behind a bid watcher's listing: %v after %d waits", err, pauses)
	}
	pauses = 0
	_, err = AcquireLockBehind(ctx, dir, "vastfleet launch", passes, func(context.Context) (bool, error) {
		pauses++
		return true, nil
	})
	if !errors.Is(err, ErrLocked) || pauses != 0 {
		t.Fatalf("a command behind another command: %v after %d waits, want refused at once", err, pauses)
	}
	l.Unlock()
	if watcher, err = AcquireLock(dir, pass); err != nil {
		t.Fatal(err)
	}
	defer watcher.Unlock()
	_, err = AcquireLockBehind(ctx, dir, "vastfleet launch", passes, func(context.Context) (bool, error) {
		pauses++
		return pauses < 5, nil
	})
	if !errors.Is(err, ErrLocked) || pauses != 5 {
		t.Fatalf("a watcher that never lets go: %v after %d waits, want refused at the bound", err, pauses)
	}
	wantErr := errors.New("interrupted")
	if _, err = AcquireLockBehind(ctx, dir, "vastfleet launch", passes, func(context.Context) (bool, error) { return true, wantErr }); !errors.Is(err, wantErr) {
		t.Fatalf("a wait that is interrupted: %v, want %v", err, wantErr)
	}
}
