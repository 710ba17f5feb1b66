package bidwatch

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const childEnv = "VASTFLEET_BIDWATCH_TEST_CHILD"

// TestMain lets the test binary stand in for the vastfleet a watcher is
// started from: as the child, it writes to its log what it was given.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		cmdline, _ := os.ReadFile("/proc/self/cmdline") // the argv ps shows, where the OS has it
		b, _ := json.Marshal(childSaw{Args: os.Args, Cmdline: string(cmdline), Key: os.Getenv("VAST_API_KEY")})
		fmt.Printf("child: %s\n", b)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type childSaw struct {
	Args    []string
	Cmdline string
	Key     string
}

// TestTheAPIKeyReachesTheWatcherOnlyThroughItsEnvironment: the detached
// watcher gets the API key in its environment; its command line, which
// any user of the machine may read (ps, /proc), never holds it.
func TestTheAPIKeyReachesTheWatcherOnlyThroughItsEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const key = "vk-0123456789abcdef-secret"
	p := Process{Exe: os.Args[0], DataDir: dir, Market: "vast", APIURL: "https://console.example/api/v0", APIRate: 2, Verbose: true,
		APIKey: key, Env: append(os.Environ(), childEnv+"=1")}
	cmd, err := p.start()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, a := range cmd.Args {
		if strings.Contains(a, key) {
			t.Fatalf("the watcher's argv holds the API key: %q", cmd.Args)
		}
	}
	log, err := os.ReadFile(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, LogFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the watcher's log: %v, mode %v, want 0600", err, fi.Mode().Perm())
	}
	_, line, ok := strings.Cut(string(log), "child: ")
	if !ok {
		t.Fatalf("the watcher did not run; its log:\n%s", log)
	}
	var saw childSaw
	if err := json.Unmarshal([]byte(strings.TrimSpace(line)), &saw); err != nil {
		t.Fatalf("the watcher's report %q: %v", line, err)
	}
	if saw.Key != key {
		t.Fatalf("the watcher's VAST_API_KEY is %q, want the key", saw.Key)
	}
	if strings.Contains(strings.Join(saw.Args, " "), key) || strings.Contains(saw.Cmdline, key) {
		t.Fatalf("the watcher's command line holds the API key: %q / %q", saw.Args, saw.Cmdline)
	}
	want := []string{"--data-dir", dir, "--market", "vast", "--api-rate", "2", "--api-url", "https://console.example/api/v0", "--verbose", "watch-bids"}
	if !slices.Equal(saw.Args[1:], want) {
		t.Fatalf("the watcher's arguments: %q, want %q", saw.Args[1:], want)
	}
	if !strings.Contains(string(log), fmt.Sprintf("started by pid %d", os.Getpid())) {
		t.Fatalf("the log does not say who started the watcher:\n%s", log)
	}
}
