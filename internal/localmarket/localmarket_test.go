package localmarket

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/sim"
)

// serveEnv makes this test binary the local market for a directory.
const serveEnv = "LOCALMARKET_TEST_SERVE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(serveEnv); dir != "" {
		idle, _ := time.ParseDuration(os.Getenv("LOCALMARKET_TEST_IDLE"))
		err := Serve(context.Background(), Options{Dir: dir, Config: sim.Config{Seed: 1, Offers: 200, APIKey: "k"}, Idle: idle})
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func serveCmd(t *testing.T, dir string, idle time.Duration) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), serveEnv+"="+dir, "LOCALMARKET_TEST_IDLE="+idle.String())
	return cmd
}

// Two commands started at once find one market; it outlives them; stop
// saves it and lets go, and the next command starts it again on the
// saved state.
func TestOneMarketOutlivesItsCommands(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "sim")
	ctx := context.Background()
	urls := make([]string, 2)
	var wg sync.WaitGroup
	for i := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u, _, err := Ensure(ctx, dir, serveCmd(t, dir, time.Hour))
			if err != nil {
				t.Error(err)
			}
			urls[i] = u
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if urls[0] != urls[1] || !Alive(ctx, urls[0]) {
		t.Fatalf("two commands got markets %q and %q", urls[0], urls[1])
	}
	again, started, err := Ensure(ctx, dir, serveCmd(t, dir, time.Hour))
	if err != nil || again != urls[0] || started {
		t.Fatalf("a later command got %q (started %t, %v), want the running market %q", again, started, err, urls[0])
	}
	was, err := Stop(ctx, dir)
	if err != nil || !was {
		t.Fatalf("stop: %v, %v", was, err)
	}
	if Alive(ctx, urls[0]) {
		t.Fatal("the market still answers after stop")
	}
	if _, err := os.Stat(filepath.Join(dir, "sim-state.json")); err != nil {
		t.Fatalf("no saved state after stop: %v", err)
	}
	next, started, err := Ensure(ctx, dir, serveCmd(t, dir, time.Hour))
	if err != nil || next == urls[0] || !Alive(ctx, next) || !started {
		t.Fatalf("after stop, the next command got %q (started %t, %v)", next, started, err)
	}
	if was, err := Stop(ctx, dir); err != nil || !was {
		t.Fatalf("stop again: %v, %v", was, err)
	}
	if was, err := Stop(ctx, dir); err != nil || was {
		t.Fatalf("stop with none running: %v, %v; want false, nil", was, err)
	}
}

// The market ends by itself when nobody has used it for its idle time,
// and when its directory is removed (a test's temporary data dir).
func TestMarketEndsWhenIdleOrItsDirGoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	idleDir := filepath.Join(t.TempDir(), "sim")
	u1, _, err := Ensure(ctx, idleDir, serveCmd(t, idleDir, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	goneDir := filepath.Join(t.TempDir(), "data", "sim")
	u2, _, err := Ensure(ctx, goneDir, serveCmd(t, goneDir, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Dir(goneDir))
	// Asking a market whether it is up is a request, which would keep
	// the idle one up: its address file going is the sign instead (it
	// goes once the market has saved and let go).
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := os.Stat(filepath.Join(idleDir, URLFile))
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle market at %s did not end", u1)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if Alive(ctx, u1) {
		t.Fatalf("the idle market at %s still answers", u1)
	}
	for deadline := time.Now().Add(30 * time.Second); Alive(ctx, u2); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the market at %s is still up after its directory went", u2)
		}
	}
}
