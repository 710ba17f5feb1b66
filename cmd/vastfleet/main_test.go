package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/localmarket"
)

// built is this command, linked once per test binary: the tests run in
// parallel and each link costs seconds on a 2-core CI machine.
var built = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "vastfleet-test-")
	if err != nil {
		return "", err
	}
	builtDir = dir
	bin := filepath.Join(dir, "vastfleet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// builtDir is removed by TestMain once every test has run.
var builtDir string

// TestMain keeps the tests off the user's contexts (with a current
// context, every command here would run on that server), and lets
// testscript run the scripts' "vastfleet" as this test binary, entering
// main instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv(factory.RunAsMainEnv) == "1" {
		main() // the local market, started again as this program
	}
	dir, err := os.MkdirTemp("", "vastfleet-config-")
	if err == nil {
		os.Setenv("VASTFLEET_CONFIG", dir)
	}
	testscript.Main(cleaningUp{m, dir}, map[string]func(){"vastfleet": main})
}

// cleaningUp removes what the tests made once they have all run.
type cleaningUp struct {
	m      *testing.M
	config string
}

func (c cleaningUp) Run() int {
	code := c.m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	if c.config != "" {
		os.RemoveAll(c.config)
	}
	return code
}

// binary is this command, built once per test run.
func binary(t *testing.T) string {
	t.Helper()
	bin, err := built()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// A reader that stops early (`vastfleet search ... | head`) ends the
// command quietly with a pipeline's status for a closed pipe, not a crash.
func TestClosedPipeEndsQuietly(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	cmd := exec.Command(bin, "--data-dir", dataDir(t), "--sim-faults", "none", "search", "-n", "--all", "--json", "rentable=True")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(stdout, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	stdout.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 141 {
		t.Fatalf("after the reader closed the pipe: %v (stderr %q), want exit status 141", err, stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "error") || strings.Contains(s, "panic") {
		t.Fatalf("stderr after a closed pipe: %q", s)
	}
}

// Closing the terminal (SIGHUP) stops a launch as Ctrl+C does: exit 130,
// and every instance it rented is known to the store, none left unready.
func TestHangupStopsALaunchCleanly(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := dataDir(t)
	cmd := exec.Command(bin, "--data-dir", dir, "--sim-faults", "none", "--sim-speed", "30",
		"launch", "--count", "5", "--deadline", "30m", "--park", "--fleet", "hup", "--image", "ubuntu:22.04",
		"-n", "rentable=True num_gpus=1 dph_total<1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("launch after SIGHUP: %v, want exit 130\n%s", err, out.String())
	}
	rec, err := exec.Command(bin, "--data-dir", dir, "--sim-faults", "none", "reconcile", "--json").Output()
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	var rep struct {
		Orphans []json.RawMessage `json:"orphans"`
	}
	if err := json.Unmarshal(rec, &rep); err != nil {
		t.Fatalf("reconcile --json: %v\n%s", err, rec)
	}
	if len(rep.Orphans) != 0 {
		t.Fatalf("instances the store does not know after SIGHUP: %s", rec)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.db")); err != nil {
		t.Fatal(err)
	}
}

// dataDir is a data dir for one test, whose local market is stopped
// (and saves) before the dir is removed rather than while it is.
func dataDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	stopMarketAtCleanup(t, d)
	return d
}

// stopMarketAtCleanup stops data's local market when the test ends,
// before the temporary dirs made earlier are removed.
func stopMarketAtCleanup(t *testing.T, data string) {
	t.Cleanup(func() { stopMarket(data) })
}

func stopMarket(data string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	localmarket.Stop(ctx, filepath.Join(data, "sim"))
}

// needOnstartTools skips a test whose fleet runs the agent's onstart
// where a tool it needs is missing.
func needOnstartTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"curl", "sha256sum", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the agent's onstart needs %s", tool)
		}
	}
}
