package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The README's launch, as a user types it, on the default simulated market
// of each seed: at least 95% of 300 ready within the deadline, a non-zero
// exit when fewer than --count are, and less spent per ready instance than
// start-all-wait on the same seed (`bench launch`, realistic profile). One
// seed takes about 40 s; CI runs seed 1, and the five are
//
//	VASTFLEET_USER_LAUNCH_SEEDS=1,2,3,4,5 go test ./cmd/vastfleet -run TestUserLaunchCommand -v
func TestUserLaunchCommand(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: two 300-instance launches")
	}
	seeds := []int{1}
	if v := os.Getenv("VASTFLEET_USER_LAUNCH_SEEDS"); v != "" {
		seeds = nil
		for _, f := range strings.Split(v, ",") {
			s, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("VASTFLEET_USER_LAUNCH_SEEDS=%q: want seeds like 1,2,3", v)
			}
			seeds = append(seeds, s)
		}
	}
	bin := binary(t)
	for _, seed := range seeds {
		seedArg := strconv.Itoa(seed)
		cmd := exec.Command(bin, "--data-dir", dataDir(t), "--sim-seed", seedArg,
			"launch", "--by", "vcpu", "--count", "300", "--deadline", "10m", "--park", "--json")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, stderr.String())
		}
		var sum struct {
			Event         string  `json:"event"`
			Asked         int     `json:"asked"`
			Ready         int     `json:"ready"`
			Rented        int     `json:"rented"`
			BootSpend     float64 `json:"boot_spend"` // bandwidth included
			PastDeadlineS float64 `json:"past_deadline_s"`
			ReadyIDs      []int64 `json:"ready_ids"`
			Fleet         string  `json:"fleet"`
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var line struct {
				Event string `json:"event"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Event == "summary" {
				if err := json.Unmarshal(sc.Bytes(), &sum); err != nil {
					t.Fatal(err)
				}
			}
		}
		if sum.Event != "summary" {
			t.Fatalf("seed %d: no summary line (exit %d)\n%s", seed, code, stderr.String())
		}
		perReady := sum.BootSpend / float64(max(sum.Ready, 1))

		bench, err := exec.Command(bin, "bench", "launch", "--profile", "realistic", "--seed", seedArg, "--json").Output()
		if err != nil {
			t.Fatalf("bench launch --seed %d: %v", seed, err)
		}
		var rows []struct {
			Strategy      string  `json:"strategy"`
			Ready         int     `json:"ready_at_deadline"`
			TotalPerReady float64 `json:"total_per_ready"`
		}
		if err := json.Unmarshal(bench, &rows); err != nil {
			t.Fatal(err)
		}
		var saw float64
		var sawReady int
		for _, r := range rows {
			if r.Strategy == "start-all-wait" {
				saw, sawReady = r.TotalPerReady, r.Ready
			}
		}
		t.Logf("seed %d: %d/%d ready, %d rented, $%.2f spent, $%.4f per ready, %+.0f s past the deadline, exit %d | start-all-wait: %d/300 ready, $%.4f per ready",
			seed, sum.Ready, sum.Asked, sum.Rented, sum.BootSpend, perReady, sum.PastDeadlineS, code, sawReady, saw)
		if sum.Ready < 285 {
			t.Errorf("seed %d: %d of 300 ready, want at least 95%%", seed, sum.Ready)
		}
		if (sum.Ready < 300) != (code == 3) {
			t.Errorf("seed %d: %d ready of 300 and exit %d: want exit 3 exactly when fewer than --count are ready", seed, sum.Ready, code)
		}
		if len(sum.ReadyIDs) != sum.Ready || sum.Fleet == "" {
			t.Errorf("seed %d: summary names fleet %q and %d ready ids for %d ready", seed, sum.Fleet, len(sum.ReadyIDs), sum.Ready)
		}
		if sum.PastDeadlineS > 30 {
			t.Errorf("seed %d: ended %.0f s after its deadline", seed, sum.PastDeadlineS)
		}
		if perReady >= saw {
			t.Errorf("seed %d: $%.4f per ready instance, not below start-all-wait's $%.4f", seed, perReady, saw)
		}
	}
}
