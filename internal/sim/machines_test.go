package sim

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/provider"
)

// TestFailuresFollowMachines rents every offer of a realistic market twice:
// unreliable machines fail clearly more often than reliable ones, and a
// machine that failed its first renter fails the second more often than
// one that did not.
func TestFailuresFollowMachines(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: statistics over many rentals, not concurrency; the plain run covers it")
	}
	f := Faults{StuckLoading: 0.05, BootFail: 0.05, HostOffline: 0.02}
	clk := clock.NewManual(t0)
	m, err := New(Config{Seed: 3, Offers: DefaultOffers, Faults: f, Balance: 1e9, Clock: clk, APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	failed := func(in *instance) bool { return in.Fault == "stuck" || in.Fault == "bootfail" || in.Fault == "offline" }
	rentAll := func() map[int64]bool {
		out := map[int64]bool{}
		now := clk.Now()
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
		clk.Advance(time.Minute)
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

// TestSiblingOffersShareTheMachine rents slices of a multi-GPU machine
// listed as several offers: renting some GPUs hides the siblings that no
// longer fit, and a create on one answers no_such_ask; destroying the
// rental lists them again.
func TestSiblingOffersShareTheMachine(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 4, Offers: 2000, Balance: 1e6})
	byMachine := map[int64][]Offer{}
	for _, o := range h.m.offers {
		byMachine[o.MachineID] = append(byMachine[o.MachineID], o)
	}
	// A machine with 1, 2 and 4 or 8-GPU slices.
	var slices []Offer
	for _, os := range byMachine {
		if len(os) >= 3 && MachineGPUs(&os[0]) >= 4 && (slices == nil || os[0].MachineID < slices[0].MachineID) {
			slices = os
		}
	}
	if slices == nil {
		t.Fatal("no machine lists three slices")
	}
	sort.Slice(slices, func(i, j int) bool { return slices[i].NumGPUs < slices[j].NumGPUs })
	total := MachineGPUs(&slices[0])
	for _, s := range slices {
		if s.HostID != slices[0].HostID || s.Reliability != slices[0].Reliability || MachineGPUs(&s) != total {
			t.Fatalf("siblings differ in host, reliability or machine size: %+v", slices)
		}
	}
	q := fmt.Sprintf(`{"machine_id":{"eq":%d},"rentable":{"eq":true},"order":[],"type":"on-demand","allocated_storage":5}`, slices[0].MachineID)
	if got := h.search(q); len(got) != len(slices) {
		t.Fatalf("%d rentable slices listed, want %d", len(got), len(slices))
	}
	// Renting the biggest slice but one leaves total-that free GPUs.
	mid := slices[len(slices)-2]
	id := h.create(mid.ID, "slice")
	free := total - mid.NumGPUs
	var want int
	for _, s := range slices {
		if s.ID != mid.ID && s.NumGPUs <= free {
			want++
		}
	}
	got := h.search(q)
	if len(got) != want {
		t.Errorf("after renting %d of %d GPUs: %d slices listed, want %d", mid.NumGPUs, total, len(got), want)
	}
	whole := slices[len(slices)-1]
	var e struct{ Error string }
	if st, _, _ := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", whole.ID), map[string]any{"image": "ubuntu:22.04"}, &e); st != 404 || e.Error != "no_such_ask" {
		t.Errorf("create on a sibling that no longer fits: %d %+v", st, e)
	}
	if st, _, body := h.do("DELETE", fmt.Sprintf("/api/v0/instances/%d/", id), nil, nil); st != 200 {
		t.Fatalf("destroy: %d %s", st, body)
	}
	if got := h.search(q); len(got) != len(slices) {
		t.Errorf("after destroy: %d slices listed, want %d", len(got), len(slices))
	}
}

// TestGPUTakenWhileStoppedWaitsForTheRival stops an instance until another
// renter takes its GPU: the start waits in Scheduling for that rental's
// length, at least half an hour, and then loads and runs by itself.
func TestGPUTakenWhileStoppedWaitsForTheRival(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 8, Faults: Faults{TakenWhileStopped: 1}})
	a := h.create(h.cheapOffer().ID, "a")
	h.clock.Set(h.stateOf(a).ReadyAt)
	h.setState(a, "stopped")
	h.clock.Advance(time.Minute)
	h.setState(a, "running")
	if in := h.show(a); !strings.Contains(in.StatusMsg, "Scheduling") {
		t.Fatalf("start after the GPU was taken: %q %q", in.Status(), in.StatusMsg)
	}
	h.m.cfg.Faults.TakenWhileStopped = 0
	free := h.stateOf(a).FreeAt
	if d := free.Sub(h.clock.Now()); d < 30*time.Minute || d > 12*time.Hour {
		t.Fatalf("the rival holds the GPU for %s, want 30m to 12h", d)
	}
	h.clock.Advance(29 * time.Minute)
	if in := h.show(a); in.Status() != "stopped" || in.IntendedStatus != "running" || !strings.Contains(in.StatusMsg, "Scheduling") {
		t.Fatalf("while the rival holds the GPU: %q/%q %q", in.Status(), in.IntendedStatus, in.StatusMsg)
	}
	h.clock.Set(free.Add(time.Second))
	if in := h.show(a); in.Status() != "loading" {
		t.Fatalf("once the rival let go: %q %q, want loading", in.Status(), in.StatusMsg)
	}
	h.clock.Set(h.stateOf(a).ReadyAt)
	if in := h.show(a); in.Status() != "running" {
		t.Errorf("after loading: %q %q", in.Status(), in.StatusMsg)
	}
}

// TestImageSizeShapesBootYield rents the same 300 offers with a 0.3 GB and
// an 8 GB image on the realistic profile's hosts: the big image's pull and
// extraction, slowest on the slow hosts, leave clearly fewer running after
// 10 minutes.
func TestImageSizeShapesBootYield(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: statistics over many rentals, not concurrency; the plain run covers it")
	}
	f, err := Profile("realistic")
	if err != nil {
		t.Fatal(err)
	}
	f.RateLimit, f.Rate429, f.Rate5xx, f.LostCreate, f.CreateRace, f.OfferChurnPerHour = 0, 0, 0, 0, 0, 0
	ready := func(image string, gb float64) (rented, running int) {
		h := newHarness(t, Config{Seed: 14, Offers: DefaultOffers, Faults: f, Balance: 1e6, ImageSizes: map[string]float64{image: gb}})
		offers := h.search(`{"rentable":{"eq":true},"inet_down":{"gte":"200"},"order":[["dph_total","asc"]],"type":"on-demand","allocated_storage":20,"limit":300}`)
		for _, o := range offers {
			var out struct {
				NewContract int64 `json:"new_contract"`
			}
			st, _, body := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", o.ID), map[string]any{"image": image, "disk": 20}, &out)
			switch {
			case st == 404 && strings.Contains(string(body), "no_such_ask"):
				// A slice of a machine whose GPUs this account's earlier
				// rents already hold: the same offers fail in both runs.
			case st != 200:
				t.Fatalf("create: %d %s", st, body)
			default:
				rented++
			}
		}
		h.clock.Advance(10 * time.Minute)
		for _, in := range h.m.Instances() {
			if in.Status() == provider.StateRunning {
				running++
			}
		}
		return rented, running
	}
	rented, small := ready("small:1", 0.3)
	rentedBig, big := ready("big:1", 8)
	t.Logf("running after 10 minutes: %d of %d with a 0.3 GB image, %d of %d with 8 GB", small, rented, big, rentedBig)
	if rented < 250 || rentedBig != rented {
		t.Fatalf("rented %d and %d of the 300 cheapest; want the same 250 or more both times", rented, rentedBig)
	}
	if float64(small) < 0.8*float64(rented) || big > small-30 {
		t.Errorf("running after 10 minutes: %d with 0.3 GB, %d with 8 GB, of %d; want all but the failed hosts, and clearly fewer", small, big, rented)
	}
}

// TestOfferChurnIsPerOffer watches which offers others hold, minute by
// minute for two hours: offers come and go at many different minutes, not
// all together on the hour, and about the profile's share is held at once.
func TestOfferChurnIsPerOffer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 23, Offers: 2000, Faults: Faults{OfferChurnPerHour: 0.05}})
	prev := map[int64]bool{}
	changed, held := map[int]bool{}, 0
	for minute := range 120 {
		now := t0.Add(time.Duration(minute) * time.Minute)
		for _, o := range h.m.offers {
			c := h.m.churned(o.ID, now)
			if c {
				held++
			}
			if minute > 0 && c != prev[o.ID] {
				changed[minute] = true
			}
			prev[o.ID] = c
		}
	}
	share := float64(held) / float64(120*len(h.m.offers))
	t.Logf("offers changed hands in %d of 119 minutes; %.1f%% held by others on average", len(changed), 100*share)
	if len(changed) < 60 {
		t.Errorf("offers changed hands in only %d of 119 minutes: churn moves in lockstep", len(changed))
	}
	if share < 0.03 || share > 0.07 {
		t.Errorf("%.3f of offers held by others, want about 0.05", share)
	}
}
