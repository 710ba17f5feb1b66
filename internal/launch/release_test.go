package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch/launchsim"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// A released instance that the listing shows "Scheduling" (its GPUs were
// taken while it was parked) is replaced as soon as it has waited
// SchedulingFor, not at the release timeout.
func TestSchedulingReplacedAtOnce(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 3, sim.Faults{TakenWhileStopped: 0.5})
	rec := &recorder{}
	spec := baseSpec("sched", 10)
	spec.Park = true
	spec.Deadline = 40 * time.Minute
	spec.ReleaseTimeout = 10 * time.Minute
	sum, err := Run(context.Background(), e.M, spec, launchsim.Candidates(e.Mkt, 10), rec.add)
	if err != nil {
		t.Fatal(err)
	}
	rel := rec.find(EvRelease, "")
	f := rec.find(EvFailed, "scheduling")
	if rel == nil || f == nil {
		t.Fatalf("release %v, scheduling failure %v: want both", rel, f)
	}
	if waited := f.At.Sub(rel.At); waited > SchedulingFor+2*DefaultPollEvery {
		t.Errorf("the scheduling instance was replaced %s after the release, want within %s", waited, SchedulingFor+2*DefaultPollEvery)
	}
	if rec.find(EvFailed, "not running") != nil {
		t.Error("an instance waited for the release timeout")
	}
	if sum.Ready != 10 {
		t.Errorf("summary %+v: want 10 ready", sum)
	}
	for _, st := range e.Mkt.State() {
		if st.ID == f.InstanceID && !st.Destroyed {
			t.Errorf("instance %d left scheduling", st.ID)
		}
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

// failFirstStart answers the first start of every instance with HTTP 500,
// as a marketplace having a bad moment does, and counts the starts per
// instance, sent one by one or in bulk (a bulk call holding any
// instance's first start fails whole).
type failFirstStart struct {
	mu     sync.Mutex
	starts map[string]int
}

func (f *failFirstStart) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/api/v0/instances/") {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if strings.Contains(string(body), `"state":"running"`) {
				var bulk struct {
					IDs []int64 `json:"ids"`
				}
				json.Unmarshal(body, &bulk)
				keys := []string{r.URL.Path}
				if r.URL.Path == "/api/v0/instances/" {
					keys = keys[:0]
					for _, id := range bulk.IDs {
						keys = append(keys, fmt.Sprintf("/api/v0/instances/%d/", id))
					}
				}
				f.mu.Lock()
				first := false
				for _, k := range keys {
					f.starts[k]++
					first = first || f.starts[k] == 1
				}
				f.mu.Unlock()
				if first {
					http.Error(w, `{"success":false,"error":"server_error"}`, http.StatusInternalServerError)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// A release start answered with HTTP 500 is sent again at the next
// listing: the instance runs, instead of waiting out its release timeout
// and being replaced.
func TestFailedStartIsResent(t *testing.T) {
	t.Parallel()
	ff := &failFirstStart{starts: map[string]int{}}
	e, err := launchsim.NewWrapped(context.Background(), 5, 3000, sim.Faults{}, t.TempDir(), ff.wrap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	rec := &recorder{}
	spec := baseSpec("resend", 8)
	spec.Park, spec.ParkAll = true, true
	spec.Spare = -1
	spec.Deadline = 30 * time.Minute
	sum, err := Run(context.Background(), e.M, spec, launchsim.Candidates(e.Mkt, 10), rec.add)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Ready != 8 || sum.Rented != 8 || sum.Failed != 0 {
		t.Errorf("summary %+v: want the 8 rentals ready, none failed or replaced", sum)
	}
	ff.mu.Lock()
	defer ff.mu.Unlock()
	if len(ff.starts) != 8 {
		t.Errorf("starts sent to %d instances, want 8", len(ff.starts))
	}
	for path, n := range ff.starts {
		if n != 2 {
			t.Errorf("%s: %d starts, want 2 (the failed one and the re-send)", path, n)
		}
	}
	checkNoLeaks(t, e.Mkt, e.St)
}

// Parked launches with deadlines longer than the published 10 minutes, on
// the CLI's defaults and the default market. Parked GPUs go to other
// renters by the minute, so a fleet that waits, parked, for the spares a
// short deadline would need, or for stragglers stuck loading until their
// boot timeout, loses more than it gains. Released only when nothing was
// left to boot, these launches ended at 41 of 50 (the first is `vastfleet
// demo`'s), 48 of 50, 94 of 100 and 86 of 100. VASTFLEET_PARKED_GRID=1
// runs 50 and 100 with 10-, 20- and 45-minute deadlines on seeds 1-5 too.
func TestLongDeadlineParkedLaunchesReachTheirCount(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: whole launches on the default market; the plain run covers them")
	}
	type launchCase struct {
		name     string
		seed     int64
		count    int
		deadline time.Duration
		query    string // "" is the default filter
		image    string
	}
	cases := []launchCase{
		{"demo", 1, 50, 45 * time.Minute, "rentable=True cpu_cores_effective>=4", "ubuntu:22.04"},
		{"50 in 20m", 2, 50, 20 * time.Minute, "", DefaultImage},
		{"100 in 20m", 5, 100, 20 * time.Minute, "", DefaultImage},
		{"100 in 45m", 1, 100, 45 * time.Minute, "", DefaultImage},
	}
	if os.Getenv("VASTFLEET_PARKED_GRID") != "" {
		// The whole grid: 50 and 100, 10, 20 and 45 minutes, seeds 1-5.
		cases = cases[:1]
		for _, count := range []int{50, 100} {
			for _, d := range []time.Duration{10 * time.Minute, 20 * time.Minute, 45 * time.Minute} {
				for seed := int64(1); seed <= 5; seed++ {
					cases = append(cases, launchCase{fmt.Sprintf("%d in %s seed %d", count, d, seed), seed, count, d, "", DefaultImage})
				}
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			faults, err := sim.Profile("realistic")
			if err != nil {
				t.Fatal(err)
			}
			e, err := launchsim.New(ctx, c.seed, sim.DefaultOffers, faults, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			spec := DefaultSpec("long", c.count, c.deadline, true)
			spec.Create = Create(c.image, DefaultDisk)
			q, err := DefaultQuery(DefaultDisk)
			if c.query != "" {
				q, _, err = market.Parse(c.query, market.ParseOptions{Type: "on-demand", Storage: DefaultDisk, Strict: true})
			}
			if err != nil {
				t.Fatal(err)
			}
			by, err := market.ScoreBy(DefaultBy)
			if err != nil {
				t.Fatal(err)
			}
			cands, _, err := Candidates(ctx, e.M.P, q, by)
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			start := e.Clock.Now()
			sum, err := Run(ctx, e.M, spec, cands, rec.add)
			if err != nil {
				t.Fatal(err)
			}
			rel := rec.find(EvRelease, "")
			if rel == nil {
				t.Fatal("no release")
			}
			lost := 0
			rec.mu.Lock()
			for _, ev := range rec.evs {
				if ev.Event == EvFailed && strings.Contains(ev.Msg, "after the release") {
					lost++
				}
			}
			rec.mu.Unlock()
			t.Logf("%d of %d ready from %d rented, $%.2f; released %s after the start (%s), %d lost at the release",
				sum.Ready, c.count, sum.Rented, sum.BootSpend, rel.At.Sub(start), rel.Msg, lost)
			if sum.Ready < c.count {
				t.Errorf("%d of %d ready", sum.Ready, c.count)
			}
		})
	}
}

// pacedClient is a marketplace client that paces its calls at rate a
// second (vast.Client.Rate).
type pacedClient struct {
	provider.Provider
	rate rate.Limit
}

func (p pacedClient) Rate() rate.Limit { return p.rate }

// The watch between ticks takes at most a quarter of a paced client's
// calls: on vast.ai (4 calls a second, 25 instances a page) a 400-node
// fleet's 16-page listing is watched every 16 s, not every 2 s; an
// unpaced client (the simulator) and a one-page fleet are watched at
// WatchEvery.
func TestWatchSpacedByThePacedClientsCalls(t *testing.T) {
	for _, c := range []struct {
		rate  rate.Limit
		pages int
		want  time.Duration
	}{
		{0, 16, 2 * time.Second},
		{4, 1, 2 * time.Second},
		{4, 16, 16 * time.Second},
		{2, 3, 6 * time.Second},
	} {
		r := &runner{f: fleet.LaunchOps{M: &fleet.Manager{P: pacedClient{rate: c.rate}}}, model: model{spec: Spec{WatchEvery: 2 * time.Second}}, listPages: c.pages}
		if got := r.watchEvery(); got != c.want {
			t.Errorf("rate %v, %d pages: watch every %s, want %s", c.rate, c.pages, got, c.want)
		}
	}
}
