package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/offerbench"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// shaProbe hashes a fixed 100 MB and prints MB/s: CPU-bound, so a
// simulated machine with fewer true cores than it advertises (its
// processes stopped part of the time) measures less.
const shaProbe = `s=$(date +%s%N); head -c 100M /dev/zero | sha256sum >/dev/null; e=$(date +%s%N); echo $((100000000000/(e-s))) MB/s`

// benchOffersSeed and benchOffersSpoof make a market where two of the
// five probed machine types advertise about three times the cores they
// have, the listing's $/vCPU pick among them, and an honest one costs
// about as much.
const (
	benchOffersSeed  = 5
	benchOffersSpoof = 0.3
)

// On a market where advertised and true cores differ, bench offers ranks
// the probed types by what they measured, destroys every instance, and
// saves a ranking search --from reads back in the same order. Figures are
// logged: this machine's two shared cores make them noisy.
func TestBenchOffersRanksByMeasuredUnitsPerDollar(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	save := filepath.Join(t.TempDir(), "probed.json")
	spoof := strconv.FormatFloat(benchOffersSpoof, 'g', -1, 64)
	r := e.ok("--sim-seed", strconv.Itoa(benchOffersSeed), "--sim-spoof", spoof, "bench", "offers", "--probe", shaProbe,
		"--top", "5", "--timeout", "60s", "--image", "ubuntu:22.04", "--save", save, "--json")
	res := decode[offerbench.Result](t, r.out)
	if len(res.Rows) != 5 {
		t.Fatalf("%d rows, want 5:\n%s\n%s", len(res.Rows), r.out, r.err)
	}

	// Which probed machines lie: the same seed's market, drawn apart.
	mkt, err := sim.New(sim.Config{Seed: benchOffersSeed, Faults: sim.Faults{Spoof: benchOffersSpoof}})
	if err != nil {
		t.Fatal(err)
	}
	defer mkt.Close()
	var rented []int64
	var honest, spoofed []float64
	types := map[string]bool{}
	for i, row := range res.Rows {
		if row.Status != offerbench.StatusOK || row.Rank != i+1 || row.UnitsPerS <= 0 {
			t.Errorf("row %d: %+v, want a pass ranked %d", i, row, i+1)
		}
		if i > 0 && row.UnitsPerDollar > res.Rows[i-1].UnitsPerDollar {
			t.Errorf("row %d measured more per dollar than row %d", i, i-1)
		}
		if types[row.Type] {
			t.Errorf("type %s probed twice", row.Type)
		}
		types[row.Type] = true
		rented = append(rented, row.InstanceID)
		c, ok := mkt.Capacity(row.OfferID)
		if !ok {
			t.Fatalf("offer %d is not in the seed's market", row.OfferID)
		}
		if c.Spoofed {
			spoofed = append(spoofed, row.UnitsPerS)
		} else {
			honest = append(honest, row.UnitsPerS)
		}
		t.Logf("rank %d  offer %d  %-45s  %3.0f vCPU (true %4.1f)  $%.4f/hr  %6.0f MB/s  %9.0f MB/$  $/vCPU rank %d",
			row.Rank, row.OfferID, row.Type, row.VCPU, c.TrueCores, row.DPH, row.UnitsPerS, row.UnitsPerDollar, row.ListingRank)
	}
	if len(spoofed) == 0 || len(honest) == 0 {
		t.Fatalf("%d spoofed and %d honest among the probed: the seed no longer makes the market this test needs", len(spoofed), len(honest))
	}
	if mean(spoofed) >= mean(honest) {
		t.Errorf("spoofed hosts measured %.0f MB/s on average, honest ones %.0f: the probe did not see the short cores", mean(spoofed), mean(honest))
	}

	// The pick is the best measured by construction; the figure the issue
	// asks for is how far the listing's $/vCPU pick falls from it.
	best := res.Rows[0].UnitsPerDollar
	for _, row := range res.Rows {
		if row.UnitsPerDollar > best*1.1 {
			t.Errorf("offer %d measured %.0f per dollar, over 10%% above the pick's %.0f", row.OfferID, row.UnitsPerDollar, best)
		}
	}
	if res.ListingPickShare == nil {
		t.Fatalf("no share for the listing's pick %d", res.ListingPick)
	}
	t.Logf("probe pick: offer %d, %.0f MB/$; listing's $/vCPU pick: offer %d, %.0f%% of it; spoofed mean %.0f MB/s, honest %.0f",
		res.Rows[0].OfferID, best, res.ListingPick, 100**res.ListingPickShare, mean(spoofed), mean(honest))
	if s := *res.ListingPickShare; s <= 0 || s > 1 {
		t.Errorf("listing pick share %v, want (0, 1]", s)
	}

	// Nothing is left renting.
	slices.Sort(rented)
	slices.Sort(res.Destroyed)
	if !slices.Equal(rented, res.Destroyed) {
		t.Errorf("destroyed %v, rented %v", res.Destroyed, rented)
	}
	for _, in := range decode[[]map[string]any](t, e.ok("ls", "--all", "--json").out) {
		if in["gone"] != true {
			t.Errorf("instance %v is left: %v", in["id"], in)
		}
	}

	// search --from shows the ranking in its order, as launch --from takes it.
	got := decode[[]struct {
		ID int64 `json:"id"`
	}](t, e.ok("search", "--from", save, "--json").out)
	if len(got) != len(res.Rows) {
		t.Fatalf("search --from kept %d offers, want %d", len(got), len(res.Rows))
	}
	for i := range got {
		if got[i].ID != res.Rows[i].OfferID {
			t.Errorf("search --from row %d is offer %d, want %d", i, got[i].ID, res.Rows[i].OfferID)
		}
	}
}

// A probe that fails, prints no number or runs past --timeout is reported
// as such and never ranked; the run exits 3 and destroys everything.
func TestBenchOffersReportsFailedProbes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	save := filepath.Join(t.TempDir(), "probed.json")
	// Each node has its rank in the fleet (VASTFLEET_NODE_RANK).
	probe := `case $VASTFLEET_NODE_RANK in 0) echo 5; sleep 30;; 1) echo 7; exit 3;; 2) echo fast;; *) echo 12.5 units/s;; esac`
	r := e.run("bench", "offers", "--probe", probe, "--top", "4", "--timeout", "2s", "--image", "ubuntu:22.04", "--save", save, "--json")
	if r.code != 3 {
		t.Fatalf("exit %d, want 3\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
	}
	res := decode[offerbench.Result](t, r.out)
	status := map[string]int{}
	for _, row := range res.Rows {
		status[row.Status]++
		if !row.Passed() && (row.Rank != 0 || row.UnitsPerS != 0 || row.Error == "") {
			t.Errorf("failed row %+v: ranked or measured, or no error", row)
		}
	}
	want := map[string]int{offerbench.StatusOK: 1, offerbench.StatusTimeout: 1, offerbench.StatusFailed: 2}
	if len(status) != len(want) || status["ok"] != 1 || status["timeout"] != 1 || status["failed"] != 2 {
		t.Errorf("statuses %v, want %v\n%s", status, want, r.out)
	}
	if res.Rows[0].UnitsPerS != 12.5 || res.Rows[0].Rank != 1 {
		t.Errorf("first row %+v; want the one pass at 12.5 units/s", res.Rows[0])
	}
	if len(res.Destroyed) != 4 {
		t.Errorf("destroyed %v, want all 4", res.Destroyed)
	}
	for _, in := range decode[[]map[string]any](t, e.ok("ls", "--all", "--json").out) {
		if in["gone"] != true {
			t.Errorf("instance %v is left", in["id"])
		}
	}
	if got := decode[[]map[string]any](t, e.ok("search", "--from", save, "--json").out); len(got) != 1 {
		t.Errorf("search --from the ranking: %d offers, want the 1 that passed", len(got))
	}
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// cancelOn cancels when a line containing word is written: Ctrl+C at a
// known moment.
type cancelOn struct {
	bytes.Buffer
	word   string
	cancel context.CancelFunc
}

func (w *cancelOn) Write(b []byte) (int, error) {
	n, err := w.Buffer.Write(b)
	if strings.Contains(w.String(), w.word) {
		w.cancel()
	}
	return n, err
}

// Ctrl+C while the probes run destroys every instance before the command
// exits 130.
func TestBenchOffersDestroysOnInterrupt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errb := &cancelOn{word: "probing 3 instances", cancel: cancel}
	ios := &iostreams.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: errb, Getenv: func(k string) string {
		if k == "VASTFLEET_HOME" {
			return e.home
		}
		return ""
	}}
	code := Main(ctx, ios, []string{"--sim-speed", e.speed, "--sim-faults", "none",
		"bench", "offers", "--probe", "sleep 60; echo 1", "--top", "3", "--image", "ubuntu:22.04"})
	if code != 130 {
		t.Fatalf("exit %d, want 130\n%s", code, errb.String())
	}
	ins := decode[[]map[string]any](t, e.ok("ls", "--all", "--json").out)
	if len(ins) != 3 {
		t.Errorf("%d instances recorded, want 3\n%s", len(ins), errb.String())
	}
	for _, in := range ins {
		if in["gone"] != true {
			t.Errorf("instance %v is left after Ctrl+C", in["id"])
		}
	}
}

// bench offers parses into its options; no probe, two rankings or a top
// out of range stop it before anything is searched or rented.
func TestBenchOffersParsesIntoOptions(t *testing.T) {
	t.Parallel()
	f := &factory.Factory{}
	var got *benchOffersOptions
	if err := parseOnly(t, newBenchOffersCmd(f, capture(&got)), "--probe", "echo 1", "--top", "3", "--timeout", "30s",
		"--save", "p.json", "--by", "dlperf", "-n", "num_gpus=1"); err != nil {
		t.Fatal(err)
	}
	if got.Probe != "echo 1" || got.Top != 3 || got.Timeout != 30*time.Second || got.Save != "p.json" ||
		got.rank.By != "dlperf" || !got.query.NoDefault || !slices.Equal(got.Query, []string{"num_gpus=1"}) {
		t.Errorf("options %+v", got)
	}
	var ran bool
	for _, argv := range [][]string{
		{"--top", "3"},
		{"--probe", "echo 1", "--by", "vcpu", "--score", "cpu_cores_effective"},
	} {
		refusedBeforeRun(t, "bench offers", newBenchOffersCmd(f, refuse[benchOffersOptions](&ran)), &ran, argv...)
	}
	// Ranges are the root's check, before any command runs.
	e := newEnv(t)
	for _, argv := range [][]string{{"--top", "21"}, {"--timeout", "0s"}, {"--parallel", "-1"}} {
		if r := e.run(append([]string{"bench", "offers", "--probe", "echo 1"}, argv...)...); r.code != 2 {
			t.Errorf("bench offers %v: exit %d, want 2\n%s", argv, r.code, r.err)
		}
	}
}
