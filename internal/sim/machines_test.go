package sim

import (
	"testing"
	"time"
)

// TestFailuresFollowMachines rents every offer of a realistic market twice:
// unreliable machines fail clearly more often than reliable ones, and a
// machine that failed its first renter fails the second more often than
// one that did not.
func TestFailuresFollowMachines(t *testing.T) {
	f := Faults{StuckLoading: 0.05, BootFail: 0.05, HostOffline: 0.02}
	clock := NewManualClock(t0)
	m, err := New(Config{Seed: 3, Offers: DefaultOffers, Faults: f, Balance: 1e9, Clock: clock, APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	failed := func(in *instance) bool { return in.Fault == "stuck" || in.Fault == "bootfail" || in.Fault == "offline" }
	rentAll := func() map[int64]bool {
		out := map[int64]bool{}
		now := clock.Now()
		for _, o := range m.offers {
			in, err := m.create(o.ID, createInput{Image: "ubuntu:22.04", Disk: 10, Runtype: "ssh"}, now)
			if err != nil {
				t.Fatal(err)
			}
			out[o.ID] = failed(in)
			if err := m.destroy(in.ID, now); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(time.Minute)
		return out
	}
	first, second := rentAll(), rentAll()

	var lowN, lowF, highN, highF, all int
	for _, o := range m.offers {
		if first[o.ID] {
			all++
		}
		switch {
		case o.Reliability < 0.9:
			lowN++
			if first[o.ID] {
				lowF++
			}
		case o.Reliability > 0.98:
			highN++
			if first[o.ID] {
				highF++
			}
		}
	}
	low, high := float64(lowF)/float64(lowN), float64(highF)/float64(highN)
	share := float64(all) / float64(len(m.offers))
	t.Logf("failed: %.1f%% overall, %.1f%% of %d machines below 0.9 reliability, %.1f%% of %d above 0.98",
		100*share, 100*low, lowN, 100*high, highN)
	if low < 2.5*high {
		t.Errorf("failure share %.3f below 0.9 reliability vs %.3f above 0.98: want clearly higher", low, high)
	}
	if share < 0.08 || share > 0.16 {
		t.Errorf("overall failure share %.3f, want about the profile's 0.12", share)
	}

	var againN, againF, cleanN, cleanF int
	for _, o := range m.offers {
		if first[o.ID] {
			againN++
			if second[o.ID] {
				againF++
			}
		} else {
			cleanN++
			if second[o.ID] {
				cleanF++
			}
		}
	}
	again, clean := float64(againF)/float64(againN), float64(cleanF)/float64(cleanN)
	t.Logf("second rental failed: %.1f%% after a failure, %.1f%% after a clean first", 100*again, 100*clean)
	if again < 2*clean {
		t.Errorf("second rental fails %.3f after a failure vs %.3f after none: the machine should fail again", again, clean)
	}
}
