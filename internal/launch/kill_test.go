package launch

import (
	"context"
	"errors"
	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/launch/launchsim"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

// The kill -9 test runs a 300-instance launch in a child process (this test
// binary re-executed) against a simulator served by the parent, SIGKILLs the
// child at a random moment, then resumes the launch in the parent and checks
// that nothing leaked and nothing was rented twice. Time runs 1200× faster
// than the wall clock (a 10-minute deadline is half a second).
//
// 3 runs by default; for the long run:
//
//	VASTFLEET_KILL_RUNS=20 go test ./internal/launch -run TestKill9Resume -v
const (
	killScale  = 1200.0
	killSeed   = 21
	killOffers = 4000
	killCount  = 300
)

var killSimStart = time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)

func killSpec() Spec {
	s := BenchSpec(StrategyVastfleet, killCount, 10*time.Minute)
	s.Fleet = "kill"
	return s
}

// scaledSleep sleeps d of sim time in d/killScale of wall time.
func scaledSleep(ctx context.Context, d time.Duration) error {
	return clock.Sleep(ctx, time.Duration(float64(d)/killScale))
}

func killManager(t testing.TB, url, dbPath string, clock *sim.ScaledClock) (*fleet.Manager, *store.Store) {
	client, err := vast.New(vast.Options{BaseURL: url, APIKey: launchsim.APIKey, Timeout: 10 * time.Second,
		Sleep: scaledSleep, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	return &fleet.Manager{P: client, S: st, Clock: clock, Sleep: scaledSleep, PollEvery: 15 * time.Second}, st
}

// TestKillChild is the child's side; it does nothing unless the parent
// started it.
func TestKillChild(t *testing.T) {
	url := os.Getenv("VASTFLEET_KILL_CHILD_URL")
	if url == "" {
		t.Skip("run by TestKill9Resume")
	}
	wall, err := time.Parse(time.RFC3339Nano, os.Getenv("VASTFLEET_KILL_CHILD_WALL"))
	if err != nil {
		t.Fatal(err)
	}
	clock := sim.NewScaledClock(killSimStart, wall, killScale, time.Now)
	m, _ := killManager(t, url, os.Getenv("VASTFLEET_KILL_CHILD_DB"), clock)
	// The same offers the parent's simulator serves, ranked the same way.
	local, err := sim.New(sim.Config{Seed: killSeed, Offers: killOffers, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), m, killSpec(), launchsim.Candidates(local, 10), nil)
	t.Logf("child finished before the kill: %v", err)
}

func TestKill9Resume(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	runs := 3
	if v, err := strconv.Atoi(os.Getenv("VASTFLEET_KILL_RUNS")); err == nil && v > 0 {
		runs = v
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := range runs {
		// Kill anywhere from the first rents to past the release wave.
		killAfter := time.Duration(30+rng.IntN(1500)) * time.Millisecond
		t.Run(strconv.Itoa(i), func(t *testing.T) { killOnce(t, killAfter) })
	}
}

func killOnce(t *testing.T, killAfter time.Duration) {
	wall := time.Now()
	clock := sim.NewScaledClock(killSimStart, wall, killScale, time.Now)
	faults := launchsim.Faults()
	mkt, err := sim.New(sim.Config{Seed: killSeed, Offers: killOffers, Clock: clock, APIKey: launchsim.APIKey, Faults: faults, Balance: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mkt.Handler())
	defer srv.Close()
	db := filepath.Join(t.TempDir(), store.FileName)

	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.v")
	cmd.Env = append(os.Environ(), "VASTFLEET_KILL_CHILD_URL="+srv.URL, "VASTFLEET_KILL_CHILD_DB="+db,
		"VASTFLEET_KILL_CHILD_WALL="+wall.Format(time.RFC3339Nano))
	out, err := os.CreateTemp(t.TempDir(), "child")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(killAfter)
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	beforeResume := len(mkt.CreatesPerOffer())

	m, st := killManager(t, srv.URL, db, clock)
	defer st.Close()
	if _, err := st.GetFleet(context.Background(), "kill"); errors.Is(err, store.ErrNotFound) {
		t.Logf("killed after %s, before the fleet row was written", killAfter)
		if beforeResume != 0 {
			t.Fatalf("%d offers rented without a fleet row", beforeResume)
		}
		return
	}
	sum, err := Resume(context.Background(), m, "kill", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed after %s (%d rented, sim %s); resumed: %d ready of %d, %d rented in all",
		killAfter, beforeResume, clock.Now().Sub(killSimStart).Round(time.Second), sum.Ready, sum.Asked, len(mkt.CreatesPerOffer()))
	checkNoLeaks(t, mkt, st)
	// At 1200× the store's fsyncs take marketplace minutes, so the share
	// ready is not the point here; that the launch completes is.
	if sum.Ready == 0 {
		t.Errorf("nothing ready after resume: %+v", sum)
	}
}
