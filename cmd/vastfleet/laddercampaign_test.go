//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The ladder under test: a lifetime the agents hold themselves, and a
// destroy after a stop that only the coordinator's pass (or reap) makes.
const (
	campaignLifetime   = 6 * time.Minute
	campaignStoppedFor = 4 * time.Minute
	campaignSlack      = 2 * time.Minute // the "within the ladder plus 2 minutes"
	// campaignScale is market seconds per wall second. A wall second this
	// computer loses (an agent's install, a coordinator's start) is that
	// many market seconds: at 60x an agent that took 2 s to start held
	// its lifetime 2 market minutes late, which at 1x is 2 s.
	campaignScale = 20
)

// wallOf is d of market time in wall time.
func wallOf(d time.Duration) time.Duration { return d / campaignScale }

// TestLadderHoldsThroughKills is the teardown ladder's campaign: each round
// launches a 3-node fleet with --max-lifetime 6m --stopped-for 4m
// against a market served by its own process (20x: a market minute is 3
// wall seconds) and then, at random (the seed is logged):
//   - kills the launching process with SIGKILL at a random moment (the
//     laptop dies; nobody resumes the launch), or lets it finish;
//   - kills the coordinator with SIGKILL and starts it again after up to
//     a market minute (starting takes about another);
//   - cuts the network to the market for up to a market minute (its
//     process is frozen: every call to it, the agents' included, hangs).
//
// Then, from the simulator's own ledger: every instance's compute ended
// within its lifetime plus 2 minutes of its first compute, its storage
// within stopped_for plus 2 minutes of its compute's end, and nothing is left
// billing. One round in go test; a campaign:
//
//	VASTFLEET_LADDER_RUNS=10 go test ./cmd/vastfleet -run TestLadderHoldsThroughKills -v -timeout 60m
func TestLadderHoldsThroughKills(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds binaries and runs several processes")
	}
	runs := 1
	if n, err := strconv.Atoi(os.Getenv("VASTFLEET_LADDER_RUNS")); err == nil && n > 0 {
		runs = n
	}
	seed := time.Now().UnixNano()
	t.Logf("chaos drawn with seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	var all campaignTally
	for i := range runs {
		t.Run(fmt.Sprintf("round-%d", i), func(t *testing.T) { all.add(ladderRound(t, rng)) })
	}
	t.Logf("%d rounds, %d instances: %d within lifetime+%v, %d within stopped_for+%v; worst: ran %v past the lifetime, destroyed %v past stopped_for",
		runs, all.n, all.n-all.lateStop, campaignSlack, all.n-all.lateDestroy, campaignSlack, all.worstRun.Round(time.Second), all.worstStopped.Round(time.Second))
}

// campaignTally counts a campaign's instances that ran, and how late.
type campaignTally struct {
	n, lateStop, lateDestroy int
	worstRun, worstStopped   time.Duration // past the rung (negative: before it)
}

func (a *campaignTally) add(b campaignTally) {
	if a.n == 0 || b.n > 0 && b.worstRun > a.worstRun {
		a.worstRun = b.worstRun
	}
	if a.n == 0 || b.n > 0 && b.worstStopped > a.worstStopped {
		a.worstStopped = b.worstStopped
	}
	a.n, a.lateStop, a.lateDestroy = a.n+b.n, a.lateStop+b.lateStop, a.lateDestroy+b.lateDestroy
}

// ledgerSpan is an instance's billing as the simulator recorded it.
type ledgerSpan struct {
	computeFrom, computeTo time.Time
	storageTo              time.Time
}

func ladderRound(t *testing.T, rng *rand.Rand) (tally campaignTally) {
	r := newRunPhase(t, strconv.Itoa(campaignScale))
	r.fleet = "lad"
	coordProc := r.startCoord()
	coords := []*proc{coordProc}
	simPID := simServePID(t, r)

	launch := exec.Command(r.bin, r.vf("launch", "--coord", "auto", "--count", "3", "--fleet", r.fleet,
		"--image", "ubuntu:22.04", "--deadline", "24h", "--session", "work:exec sleep 100000",
		"--max-lifetime", campaignLifetime.String(), "--stopped-for", campaignStoppedFor.String(),
		"-n", "rentable=True num_gpus=1 dph_total<1")...)
	launchOut := &proc{}
	launch.Stdout, launch.Stderr = launchOut, launchOut
	if err := launch.Start(); err != nil {
		t.Fatal(err)
	}
	launched := make(chan struct{})
	go func() { launch.Wait(); close(launched) }()
	if os.Getenv("VASTFLEET_LADDER_KILL") != "" || rng.IntN(4) > 0 {
		into := time.Duration(rng.Int64N(int64(wallOf(4 * time.Minute))))
		select {
		case <-time.After(into):
			launch.Process.Kill()
			<-launched
			t.Logf("launch killed %v in (market time)", (into * campaignScale).Round(time.Second))
		case <-launched:
			t.Logf("launch ended before its kill at %v", (into * campaignScale).Round(time.Second))
		}
	} else {
		<-launched
		t.Logf("launch left to finish")
	}

	// Chaos through the lifetimes and the stops: steps fall due while the
	// coordinator or the network may be down.
	var events []string
	for end := time.Now().Add(wallOf(campaignLifetime + campaignStoppedFor)); time.Now().Before(end); {
		time.Sleep(wallOf(time.Duration(1+rng.IntN(3)) * time.Minute))
		down := time.Duration(rng.Int64N(int64(wallOf(time.Minute))))
		if rng.IntN(2) == 0 {
			coordProc.cmd.Process.Kill()
			coordProc.cmd.Wait()
			time.Sleep(down)
			coordProc = r.startCoord()
			coords = append(coords, coordProc)
			events = append(events, fmt.Sprintf("coordinator killed, started again after %v", (down*campaignScale).Round(time.Second)))
		} else {
			syscall.Kill(simPID, syscall.SIGSTOP)
			time.Sleep(down)
			syscall.Kill(simPID, syscall.SIGCONT)
			events = append(events, fmt.Sprintf("market unreachable for %v", (down*campaignScale).Round(time.Second)))
		}
	}
	t.Logf("chaos: %s", strings.Join(events, "; "))

	// Every instance is destroyed by its latest possible ladder end, with
	// time to spare for this computer's load.
	var spans map[int64]ledgerSpan
	var now time.Time
	eventually(t, "every instance destroyed", 3*time.Minute, func() bool {
		var st struct {
			Instances []struct {
				Destroyed bool `json:"destroyed"`
			} `json:"instances"`
		}
		if err := getJSON(r.simURL+"/sim/state", "", &st); err != nil {
			return false
		}
		for _, in := range st.Instances {
			if !in.Destroyed {
				return false
			}
		}
		return len(st.Instances) > 0
	})
	spans, now = simLedger(t, r)
	ids := make([]int64, 0, len(spans))
	for id := range spans {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		s := spans[id]
		if s.computeFrom.IsZero() {
			t.Logf("instance %d: never ran; storage ended %v", id, s.storageTo.Format(time.TimeOnly))
			continue
		}
		ran, stoppedFor := s.computeTo.Sub(s.computeFrom), s.storageTo.Sub(s.computeTo)
		t.Logf("instance %d: ran %v, then stopped for %v", id, ran.Round(time.Second), stoppedFor.Round(time.Second))
		tally.add(campaignTally{n: 1, worstRun: ran - campaignLifetime, worstStopped: stoppedFor - campaignStoppedFor})
		if ran > campaignLifetime+campaignSlack {
			tally.lateStop++
			t.Errorf("instance %d: compute billed %v, past its lifetime %v plus %v", id, ran.Round(time.Second), campaignLifetime, campaignSlack)
		}
		if stoppedFor > campaignStoppedFor+campaignSlack {
			tally.lateDestroy++
			t.Errorf("instance %d: storage billed %v after its stop, past stopped_for %v plus %v", id, stoppedFor.Round(time.Second), campaignStoppedFor, campaignSlack)
		}
	}
	t.Logf("%d instances, market time %s", len(ids), now.Format(time.TimeOnly))
	for _, p := range coords {
		if !t.Failed() {
			break // the coordinators' account of each step, when one was late
		}
		for _, line := range strings.Split(p.String(), "\n") {
			if strings.Contains(line, "instance") {
				t.Logf("coordinator: %s", line)
			}
		}
	}
	return tally
}

// simServePID is the pid of the round's `sim serve` process, found by its
// address on its command line.
func simServePID(t *testing.T, r *runPhase) int {
	t.Helper()
	addr := strings.TrimPrefix(r.simURL, "http://")
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		args := strings.Split(string(b), "\x00")
		if len(args) > 3 && args[1] == "sim" && args[2] == "serve" && strings.Contains(string(b), addr) {
			return pid
		}
	}
	t.Skip("cannot find sim serve's process in /proc")
	return 0
}

// simLedger reads the simulator's own ledger: each instance's first and
// last compute, and its last storage, with the market's now.
func simLedger(t *testing.T, r *runPhase) (map[int64]ledgerSpan, time.Time) {
	t.Helper()
	var clk struct {
		Now time.Time `json:"now"`
	}
	var l struct {
		Entries []struct {
			InstanceID int64     `json:"instance_id"`
			Kind       string    `json:"kind"`
			From       time.Time `json:"from"`
			To         time.Time `json:"to"`
		} `json:"entries"`
	}
	if err := getJSON(r.simURL+"/sim/clock", "", &clk); err != nil {
		t.Fatal(err)
	}
	if err := getJSON(r.simURL+"/sim/ledger", "", &l); err != nil {
		t.Fatal(err)
	}
	out := map[int64]ledgerSpan{}
	for _, e := range l.Entries {
		s := out[e.InstanceID]
		switch e.Kind {
		case "compute":
			if s.computeFrom.IsZero() || e.From.Before(s.computeFrom) {
				s.computeFrom = e.From
			}
			if e.To.After(s.computeTo) {
				s.computeTo = e.To
			}
		case "storage":
			if e.To.After(s.storageTo) {
				s.storageTo = e.To
			}
		}
		out[e.InstanceID] = s
	}
	return out, clk.Now
}
