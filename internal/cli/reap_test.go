package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// heardAt records, through the coordinator's real HTTP API, a heartbeat
// from each instance at the given coordinator time.
func heardAt(t *testing.T, home, fleetName string, at time.Time, ids ...int64) {
	t.Helper()
	ctx := context.Background()
	db, err := coord.OpenDB(ctx, filepath.Join(home, "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	token, _, err := db.FleetTokens(ctx, fleetName)
	if err != nil {
		t.Fatal(err)
	}
	// The instances are the fleet's: each enrolls, then beats with its
	// own credential.
	members := coord.MembershipFunc(func(context.Context, string) (map[int64]coord.Instance, error) {
		out := map[int64]coord.Instance{}
		for _, id := range ids {
			out[id] = coord.Instance{MachineID: id}
		}
		return out, nil
	})
	srv, err := coord.New(coord.Config{DB: db, Clock: clock.Fixed{At: at}, Members: members})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	post := func(path, token string, body, out any) int {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, hs.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	for _, id := range ids {
		node := "C." + strconv.FormatInt(id, 10)
		var cred wire.EnrollReply
		if code := post(wire.PathEnroll, token, wire.EnrollRequest{Fleet: fleetName, InstanceID: id, Node: node}, &cred); code != http.StatusOK {
			t.Fatalf("enrolling %d: HTTP %d", id, code)
		}
		b, _ := json.Marshal(wire.Heartbeat{Fleet: fleetName, Node: node, InstanceID: id, Seq: 1, SentAt: at})
		req, _ := http.NewRequest(http.MethodPost, hs.URL+wire.PathHeartbeat, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+cred.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("heartbeat of %d: HTTP %d", id, resp.StatusCode)
		}
	}
	hs.Close()
	srv.Close() // saves the nodes' last heartbeats
}

func fleetIDs(t *testing.T, e *env, name string) []int64 {
	t.Helper()
	var rows []fleet.InstanceView
	if err := json.Unmarshal([]byte(e.ok("ls", "--json", "--fleet", name).out), &rows); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}

func stateOf(t *testing.T, e *env, id int64) fleet.InstanceView {
	t.Helper()
	var rows []fleet.InstanceView
	if err := json.Unmarshal([]byte(e.ok("ls", "--json", "--all").out), &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("instance %d is not listed", id)
	return fleet.InstanceView{}
}

// TestReapActsOnlyOnThisFleetsSilentInstances: an instance whose agent
// fell silent long ago is stopped (the fleet's launch-time policy) and ls
// says why; one heard recently, one never heard, and a silent one of
// another fleet are left alone.
func TestReapActsOnlyOnThisFleetsSilentInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := "rentable=True num_gpus=1 dph_total<1"
	e.ok("launch", "--count", "3", "--fleet", "ra", "--image", "ubuntu:22.04", "--deadline", "30m", "-n", q)
	e.ok("launch", "--count", "1", "--fleet", "rb", "--image", "ubuntu:22.04", "--deadline", "30m", "-n", q)
	a, b := fleetIDs(t, e, "ra"), fleetIDs(t, e, "rb")
	if len(a) != 3 || len(b) != 1 {
		t.Fatalf("fleets ra %v, rb %v", a, b)
	}
	silent, recent, never, other := a[0], a[1], a[2], b[0]
	// Heard long ago, or in the far future (always recent): deterministic
	// on any clock the simulator keeps.
	heardAt(t, e.home, "ra", time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), silent)
	heardAt(t, e.home, "ra", time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC), recent)
	heardAt(t, e.home, "rb", time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), other)

	r := e.ok("reap", "--fleet", "ra")
	if !strings.Contains(r.out, "instance "+strconv.FormatInt(silent, 10)+" (fleet ra)") || !strings.Contains(r.out, "stopped") {
		t.Fatalf("reap output:\n%s\n%s", r.out, r.err)
	}
	got := stateOf(t, e, silent)
	if got.Wanted != "parked" || !strings.Contains(got.Note, "reaped (stop)") {
		t.Fatalf("the silent instance: wanted %q, note %q; want parked with a reap note", got.Wanted, got.Note)
	}
	if ls := e.ok("ls").out; !strings.Contains(ls, "instance "+strconv.FormatInt(silent, 10)+": ") || !strings.Contains(ls, "agent was silent") {
		t.Fatalf("ls does not show why the instance was stopped:\n%s", ls)
	}
	for _, id := range []int64{recent, never, other} {
		if s := stateOf(t, e, id); s.Wanted != "running" || s.Note != "" {
			t.Errorf("instance %d was touched: wanted %q, note %q", id, s.Wanted, s.Note)
		}
	}
	// Again: nothing left to do in ra (the stopped one stays stopped).
	if r := e.ok("reap", "--fleet", "ra"); !strings.Contains(r.err, "no silent instances") {
		t.Errorf("second reap:\n%s\n%s", r.out, r.err)
	}
	// Fleet rb by its own policy, destroy from the flag here.
	e.ok("reap", "--fleet", "rb", "--orphan-policy", "destroy")
	if s := stateOf(t, e, other); !s.Gone && !s.DestroyWait {
		t.Errorf("rb's silent instance was not destroyed: %+v", s)
	}
}

// TestCoordinatorReapsEachFleetByItsOwnSwitch: the pass a running
// coordinator makes reaps a fleet launched with --orphan-policy destroy
// by destroying, whatever the coordinator's own flags say; a fleet that
// recorded no switch gets the coordinator's (stop).
func TestCoordinatorReapsEachFleetByItsOwnSwitch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := "rentable=True num_gpus=1 dph_total<1"
	e.ok("launch", "--count", "1", "--fleet", "rd", "--image", "ubuntu:22.04", "--deadline", "30m", "-n", q)
	e.ok("launch", "--count", "1", "--fleet", "rs", "--image", "ubuntu:22.04", "--deadline", "30m", "-n", q)
	d, s := fleetIDs(t, e, "rd"), fleetIDs(t, e, "rs")
	if len(d) != 1 || len(s) != 1 {
		t.Fatalf("fleets rd %v, rs %v", d, s)
	}
	long := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	heardAt(t, e.home, "rd", long, d[0])
	heardAt(t, e.home, "rs", long, s[0])

	ctx := context.Background()
	db, err := coord.OpenDB(ctx, filepath.Join(e.home, "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// As `launch --coord --orphan-after 10m --orphan-policy destroy` records it.
	if err := db.SetFleetPolicy(ctx, "rd", 10*time.Minute, wire.PolicyDestroy); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	f := factory.New(&iostreams.IOStreams{Out: &out, ErrOut: &out, Getenv: func(k string) string {
		if k == "VASTFLEET_HOME" {
			return e.home
		}
		return ""
	}}, Version)
	f.Opts = factory.Options{Market: "sim", SimSpeed: 3000, SimFaults: "none"}
	err = f.ReapPass(ctx, fleet.Pass{Heartbeats: db, Switch: fleet.Switch{After: 30 * time.Minute, Policy: wire.PolicyStop},
		OnLaddered: fleet.Reporter{Out: &out, ErrOut: &out}.Laddered, OnReaped: fleet.Reporter{Out: &out, ErrOut: &out}.Reaped})
	f.Close()
	if err != nil {
		t.Fatalf("reap pass: %v\n%s", err, out.String())
	}
	if got := stateOf(t, e, d[0]); !got.Gone && !got.DestroyWait {
		t.Errorf("rd (launched with destroy) was not destroyed: %+v\n%s", got, out.String())
	}
	if got := stateOf(t, e, s[0]); got.Wanted != "parked" || got.Gone {
		t.Errorf("rs (no recorded switch) was not stopped by the coordinator's policy: %+v\n%s", got, out.String())
	}
}

// TestReapAppliesTheTeardownLadder: a fleet launched with --max-lifetime
// is stopped by reap once past it, without any coordinator, and ls says
// why, then destroyed once stopped past --stopped-for; a fleet launched without a ladder is left alone; a ladder that
// cannot mean anything is refused.
func TestReapAppliesTheTeardownLadder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := "rentable=True num_gpus=1 dph_total<1"
	if r := e.fails("launch", "--count", "1", "--idle-after", "30m", "-n", q); r.code != 2 || !strings.Contains(r.err, "idle-below") {
		t.Fatalf("--idle-after alone: exit %d, %s", r.code, r.err)
	}
	e.ok("launch", "--count", "1", "--fleet", "la", "--image", "ubuntu:22.04", "--deadline", "30m", "--max-lifetime", "1m", "--stopped-for", "1m", "-n", q)
	e.ok("launch", "--count", "1", "--fleet", "lb", "--image", "ubuntu:22.04", "--deadline", "30m", "-n", q)
	a, b := fleetIDs(t, e, "la"), fleetIDs(t, e, "lb")
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("fleets la %v, lb %v", a, b)
	}
	// ls says what the ladder does next, and when.
	if ls := e.ok("ls").out; !strings.Contains(ls, "instance "+strconv.FormatInt(a[0], 10)+": teardown ladder: stop at ") || !strings.Contains(ls, "(max lifetime 1m0s)") {
		t.Fatalf("ls does not show the ladder's next step:\n%s", ls)
	}
	if got := stateOf(t, e, a[0]); got.Next == nil || got.Next.Action != "stop" || got.Next.At.IsZero() {
		t.Fatalf("ls --json next: %+v", got.Next)
	}
	if got := stateOf(t, e, b[0]); got.Next != nil {
		t.Fatalf("lb has no ladder, ls --json shows next %+v", got.Next)
	}
	// The market's clock runs 3000× between commands: the lifetime of a
	// market minute is long past.
	r := e.ok("reap")
	if !strings.Contains(r.out, "instance "+strconv.FormatInt(a[0], 10)+" (fleet la): teardown ladder, max lifetime 1m0s: stopped") {
		t.Fatalf("reap output:\n%s\n%s", r.out, r.err)
	}
	if got := stateOf(t, e, a[0]); got.Wanted != "parked" || !strings.Contains(got.Note, "teardown ladder (stop)") {
		t.Fatalf("la's instance: wanted %q, note %q", got.Wanted, got.Note)
	}
	if got := stateOf(t, e, b[0]); got.Wanted != "running" || got.Note != "" {
		t.Fatalf("lb's instance was touched: wanted %q, note %q", got.Wanted, got.Note)
	}
	// Stopped for a market minute by the next pass or the one after
	// (market time runs on between commands): destroyed, as it bills
	// storage.
	e.ok("reap")
	r = e.ok("reap")
	if got := stateOf(t, e, a[0]); !got.Gone && !got.DestroyWait {
		t.Fatalf("la's stopped instance was not destroyed after --stopped-for: %+v\n%s\n%s", got, r.out, r.err)
	}
	if got := stateOf(t, e, b[0]); got.Wanted != "running" {
		t.Fatalf("lb's instance was touched: wanted %q", got.Wanted)
	}
}

// The running coordinator's pass applies the teardown ladder too, with
// no agent ever heard.
func TestCoordinatorPassAppliesTheTeardownLadder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("launch", "--count", "1", "--fleet", "lc", "--image", "ubuntu:22.04", "--deadline", "30m", "--max-lifetime", "1m", "-n", "rentable=True num_gpus=1 dph_total<1")
	ids := fleetIDs(t, e, "lc")
	if len(ids) != 1 {
		t.Fatalf("fleet lc %v", ids)
	}
	ctx := context.Background()
	db, err := coord.OpenDB(ctx, filepath.Join(e.home, "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out bytes.Buffer
	f := factory.New(&iostreams.IOStreams{Out: &out, ErrOut: &out, Getenv: func(k string) string {
		if k == "VASTFLEET_HOME" {
			return e.home
		}
		return ""
	}}, Version)
	f.Opts = factory.Options{Market: "sim", SimSpeed: 3000, SimFaults: "none"}
	if _, err := f.Provider(ctx); err != nil { // the market's clock, as the coordinator holds it
		t.Fatal(err)
	}
	err = f.ReapPass(ctx, fleet.Pass{Heartbeats: db, Switch: fleet.Switch{After: 30 * time.Minute, Policy: wire.PolicyStop},
		OnLaddered: fleet.Reporter{Out: &out, ErrOut: &out}.Laddered, OnReaped: fleet.Reporter{Out: &out, ErrOut: &out}.Reaped})
	f.Close()
	if err != nil {
		t.Fatalf("reap pass: %v\n%s", err, out.String())
	}
	if got := stateOf(t, e, ids[0]); got.Wanted != "parked" || !strings.Contains(got.Note, "max lifetime") {
		t.Fatalf("lc's instance past its lifetime: wanted %q, note %q\n%s", got.Wanted, got.Note, out.String())
	}
}

// TestIdleRungStopsThroughItsAgent is the idle rung as a user sets it:
// launch --coord auto --idle-after 10m --idle-below 5, with a session that
// only sleeps. The instance's agent sees its own machine's use (the
// simulator's per-machine cpu.stat), finds it idle for 10 market minutes
// (5 s at 120x) and stops its instance while the coordinator is alive;
// the coordinator's ladder, which has no rung due, never acts.
func TestIdleRungStopsThroughItsAgent(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the agent")
	}
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	q := "rentable=True num_gpus=1 dph_total<1"
	if r := e.fails("launch", "--count", "1", "--idle-after", "10m", "--idle-below", "5", "-n", q); r.code != 2 || !strings.Contains(r.err, "--coord") {
		t.Fatalf("--idle-after without --coord: exit %d, %s", r.code, r.err)
	}
	out, errOut := e.startCmd("coord", "--addr", "127.0.0.1:0", "--agent-bin", agentBin, "--fleet", "idle")
	waitFor(t, "the coordinator", 30*time.Second, func() bool { return strings.Contains(out.String(), "idle\t") })
	e.ok("launch", "--coord", "auto", "--count", "1", "--fleet", "idle", "--image", "ubuntu:22.04", "--deadline", "30m",
		"--idle-after", "10m", "--idle-below", "5", "--session", "work:exec sleep 100000", "-n", q)
	ids := fleetIDs(t, e, "idle")
	if len(ids) != 1 {
		t.Fatalf("fleet idle: %v", ids)
	}
	var got fleet.InstanceView
	waitFor(t, "the idle instance stopped", 90*time.Second, func() bool {
		got = stateOf(t, e, ids[0])
		return got.State == "stopped" || got.State == "exited"
	})
	if strings.Contains(got.Note, "teardown ladder") {
		t.Errorf("the coordinator's ladder stopped it, not its agent: %q", got.Note)
	}
	log := filepath.Join(sim.HostsDir(filepath.Join(e.home, "sim")), strconv.FormatInt(ids[0], 10), "root", ".vastfleet", "agent.log")
	if b, err := os.ReadFile(log); err != nil || !strings.Contains(string(b), "idle: stopping this instance") {
		t.Errorf("the agent's log does not say it stopped its instance as idle (%v):\n%s", err, b)
	}
	if strings.Contains(errOut.String(), "teardown ladder") {
		t.Errorf("the coordinator applied a ladder step:\n%s", errOut.String())
	}
}
