package cli

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

// cheapestOffer returns the id of the cheapest verified RTX 3090 offer.
func (e *env) cheapestOffer(query string, global ...string) string {
	e.t.Helper()
	args := append(global, "search", query, "-o", "+dph_total", "--limit", "1", "--json")
	offers := decode[[]map[string]any](e.t, e.ok(args...).out)
	if len(offers) == 0 {
		e.t.Fatalf("no offer matches %q", query)
	}
	return fmt.Sprint(int64(offers[0]["id"].(float64)))
}

func TestRentLsDestroyAcrossCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	offer := e.cheapestOffer("gpu_name=RTX_3090")
	rent := e.ok("rent", offer, "--image", "ubuntu:22.04", "--label", "exp1", "--json")
	inst := decode[map[string]any](t, rent.out)
	if inst["state"] != "running" {
		t.Fatalf("rent returned state %v, want running", inst["state"])
	}

	// A separate command sees the same market and store.
	ls := decode[[]map[string]any](t, e.ok("ls", "--json").out)
	if len(ls) != 1 {
		t.Fatalf("ls shows %d instances, want 1", len(ls))
	}
	for _, k := range []string{"id", "state", "dph_total", "ssh_url", "fleet"} {
		if _, ok := ls[0][k]; !ok {
			t.Errorf("ls --json row lacks %q", k)
		}
	}
	if ls[0]["id"] != inst["id"] || fmt.Sprint(int64(ls[0]["offer_id"].(float64))) != offer {
		t.Errorf("ls row %v does not match the rented instance %v", ls[0], inst)
	}
	// In simulator mode every address is this machine's loopback.
	if !strings.HasPrefix(ls[0]["ssh_url"].(string), "ssh://root@127.0.0.1:") {
		t.Errorf("ssh_url = %v", ls[0]["ssh_url"])
	}

	id := fmt.Sprint(int64(inst["id"].(float64)))
	if url := strings.TrimSpace(e.ok("ssh-url", id).out); url != ls[0]["ssh_url"] {
		t.Errorf("ssh-url %s = %q, ls says %v", id, url, ls[0]["ssh_url"])
	}
	if url := strings.TrimSpace(e.ok("scp-url", id).out); url != strings.Replace(ls[0]["ssh_url"].(string), "ssh://", "scp://", 1) {
		t.Errorf("scp-url %s = %q, ls says %v", id, url, ls[0]["ssh_url"])
	}
	if logs := e.ok("logs", id).out; !strings.Contains(logs, "created") {
		t.Errorf("logs %s = %q, want the instance's log", id, logs)
	}
	if bal := decode[map[string]any](t, e.ok("balance", "--json").out); bal["balance"].(float64) >= 1000 {
		t.Errorf("balance %v: the rental should have spent some of the $1000 credit", bal["balance"])
	}
	if r := e.fails("ssh-url", "999999"); !strings.Contains(r.err, "not found") {
		t.Errorf("ssh-url of a missing instance: stderr %q", r.err)
	}

	// Renting the same offer again fails: it is taken, and nothing is recorded.
	if r := e.fails("rent", offer); !strings.Contains(r.err, "no longer available") {
		t.Errorf("second rent of offer %s: stderr %q, want 'no longer available'", offer, r.err)
	}
	if n := len(decode[[]map[string]any](t, e.ok("ls", "--json").out)); n != 1 {
		t.Errorf("after a failed rent ls shows %d instances, want 1", n)
	}

	exp := decode[[]map[string]any](t, e.ok("export", "--format", "vast-instances").out)
	if len(exp) != 1 {
		t.Fatalf("export has %d rows", len(exp))
	}
	var keys []string
	for k := range exp[0] {
		keys = append(keys, k)
	}
	want := "created_at,dph,estimated_cost,estimated_hours,experiment,gpu_name,instance_id,num_gpus,offer_id,ssh_host,ssh_port,ssh_url,status"
	if got := strings.Join(sorted(keys), ","); got != want {
		t.Errorf("export keys = %s\nwant %s", got, want)
	}

	e.ok("destroy", "--all", "--yes")
	if n := len(decode[[]map[string]any](t, e.ok("ls", "--json").out)); n != 0 {
		t.Errorf("after destroy --all, ls shows %d instances", n)
	}
	gone := decode[[]map[string]any](t, e.ok("ls", "--all", "--json").out)
	if len(gone) != 1 || gone[0]["gone"] != true {
		t.Errorf("ls --all after destroy = %v, want the instance marked gone", gone)
	}
}

func sorted(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

func TestInstanceCommandsRejectBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.fails("destroy", "424242"); r.code != 2 || !strings.Contains(r.err, "not one vastfleet tracks") {
		t.Errorf("destroy unknown id: exit %d, stderr %q", r.code, r.err)
	}
	if r := e.fails("stop", "abc"); r.code != 2 {
		t.Errorf("stop abc: exit %d, want 2", r.code)
	}
	if r := e.fails("rent", "999999999"); !strings.Contains(r.err, "no longer available") {
		t.Errorf("rent of a missing offer: stderr %q", r.err)
	}
	if r := e.fails("destroy"); r.code != 2 {
		t.Errorf("destroy with no ids: exit %d, want 2", r.code)
	}
	// destroy --all without --yes and without a terminal destroys nothing.
	offer := e.cheapestOffer("gpu_name=RTX_3060")
	e.ok("rent", offer, "--no-wait")
	if r := e.fails("destroy", "--all"); !strings.Contains(r.err, "not confirmed") {
		t.Errorf("destroy --all without --yes: stderr %q", r.err)
	}
	if n := len(decode[[]map[string]any](t, e.ok("ls", "--json").out)); n != 1 {
		t.Errorf("unconfirmed destroy --all changed the instances: %d left", n)
	}

	// A malformed state file is refused whole and the store keeps its rows.
	bad := filepath.Join(e.home, "bad.json")
	os.WriteFile(bad, []byte(`[{"instance_id": 5, "offer_id": 1, "gpu_name": "RTX 3090", "num_gpus": 1, "dph": 0.2,
		"ssh_url": "", "ssh_host": "", "ssh_port": 0, "created_at": "yesterday", "status": "running",
		"experiment": "", "estimated_hours": null, "estimated_cost": null}]`), 0o644)
	if r := e.fails("import", bad); !strings.Contains(r.err, "created_at") || !strings.Contains(r.err, "nothing was imported") {
		t.Errorf("import of a bad file: stderr %q", r.err)
	}
	if n := len(decode[[]map[string]any](t, e.ok("ls", "--json").out)); n != 1 {
		t.Errorf("failed import changed the store: %d instances", n)
	}
	e.ok("destroy", "--all", "--yes")
}

func TestPlanOptionsAndRent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := decode[map[string]any](t, e.ok("plan", "--model", "7b", "--precision", "bf16", "--train", "--hours", "4", "--json").out)
	req := res["requirements"].(map[string]any)
	for _, k := range []string{"vram_gb", "num_gpus", "hours", "disk_gb", "cuda"} {
		if _, ok := req[k]; !ok {
			t.Errorf("requirements lack %q", k)
		}
	}
	opts := res["options"].([]any)
	if len(opts) != 3 {
		t.Fatalf("got %d options, want 3", len(opts))
	}
	prev := 0.0
	labels := map[string]bool{}
	for i, o := range opts {
		o := o.(map[string]any)
		if int(o["rank"].(float64)) != i+1 {
			t.Errorf("option %d has rank %v", i, o["rank"])
		}
		total := o["est_total"].(float64)
		if total < prev {
			t.Errorf("options not ordered by est_total: %v after %v", total, prev)
		}
		prev = total
		for _, l := range strings.Split(o["label"].(string), ", ") {
			labels[l] = true
		}
	}
	for _, l := range []string{"cheapest", "fastest"} {
		if !labels[l] {
			t.Errorf("no option labelled %q: %v", l, labels)
		}
	}

	table := e.ok("plan", "--model", "7b", "--precision", "bf16", "--train", "--hours", "4").out
	if !strings.Contains(table, "Est.total") || !strings.Contains(table, "cheapest") {
		t.Errorf("plan table:\n%s", table)
	}

	e.ok("plan", "--model", "7b", "--precision", "bf16", "--train", "--hours", "4", "--rent", "1")
	ls := decode[[]map[string]any](t, e.ok("ls", "--json").out)
	if len(ls) != 1 || ls[0]["state"] != "running" {
		t.Fatalf("after plan --rent 1, ls = %v", ls)
	}
	first := opts[0].(map[string]any)
	if ls[0]["offer_id"] != first["offer_id"] || ls[0]["estimated_cost"] != first["est_total"] {
		t.Errorf("rented %v (est %v), want option 1 offer %v with est %v", ls[0]["offer_id"], ls[0]["estimated_cost"], first["offer_id"], first["est_total"])
	}
	cost := decode[map[string]any](t, e.ok("cost", "--json").out)
	if cost["estimated"] == nil {
		t.Errorf("cost report lacks the estimate: %v", cost)
	}
}

func TestPlanBadInputRentsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.fails("plan", "--model", "lama-7b"); !strings.Contains(r.err, "llama") {
		t.Errorf("unknown model: stderr %q should list close matches", r.err)
	}
	if r := e.fails("plan", "--params", "-7"); r.code != 2 {
		t.Errorf("negative params: exit %d, want 2 (%s)", r.code, r.err)
	}
	if r := e.fails("plan", "--model", "7b", "--hours", "0.5", "--max-budget", "0.001", "--rent", "1"); !strings.Contains(r.err, "budget") {
		t.Errorf("budget below every option: stderr %q", r.err)
	}
	if r := e.fails("plan"); r.code != 2 {
		t.Errorf("plan with no task: exit %d, want 2", r.code)
	}
	if n := len(decode[[]map[string]any](t, e.ok("ls", "--json").out)); n != 0 {
		t.Errorf("bad plans rented %d instances", n)
	}
}

func TestLsWhileAnotherProcessHoldsTheDataDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	offer := e.cheapestOffer("gpu_name=RTX_3090")
	e.ok("rent", offer, "--image", "ubuntu:22.04")
	// Another vastfleet (a launch in a second terminal) holds the lock.
	l, err := store.AcquireLock(e.home, "vastfleet launch --count 300")
	if err != nil {
		t.Fatal(err)
	}
	// Looking needs no lock: ls and cost run beside the holder, and read
	// the same local market live.
	r := e.ok("ls", "--json")
	if ls := decode[[]map[string]any](t, r.out); len(ls) != 1 || ls[0]["state"] != "running" || strings.Contains(r.err, "last recorded") {
		t.Errorf("ls while locked: %v, stderr %q; want the one instance running, live", ls, r.err)
	}
	e.ok("cost", "--json")
	if r := e.fails("destroy", "--all", "--yes"); !strings.Contains(r.err, "launch --count 300") || !strings.Contains(r.err, "`vastfleet ls`, `cost` and ssh") {
		t.Errorf("destroy while locked: stderr %q, want the lock holder named and what works meanwhile", r.err)
	}
	l.Unlock()
	e.ok("destroy", "--all", "--yes")
}

// serveSim serves a simulated market over loopback, as `vastfleet sim
// serve` does, at a pace that lets rentals boot within a test.
func serveSim(t *testing.T) (*sim.Market, *httptest.Server) {
	t.Helper()
	// With machines behind its instances, as `sim serve` has: destroy's
	// check for uncollected results then gets an answer rather than
	// waiting out a refused port's retries (31 s).
	mkt, err := sim.New(sim.Config{Seed: 3, APIKey: sim.DefaultAPIKey, TimeScale: 3000, HostDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mkt.Close() })
	srv := httptest.NewServer(mkt.Handler())
	t.Cleanup(srv.Close)
	return mkt, srv
}

// A simulator served elsewhere (`vastfleet sim serve`) is reached with
// --api-url; costs are then computed in that simulator's time.
func TestRemoteSimulator(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mkt, srv := serveSim(t)
	remote := func(args ...string) []string { return append([]string{"--api-url", srv.URL}, args...) }
	e.ok(remote("rent", e.cheapestOffer("gpu_name=RTX_3090", "--api-url", srv.URL), "--image", "ubuntu:22.04")...)
	if n := len(mkt.Instances()); n != 1 {
		t.Fatalf("the remote simulator holds %d instances, want 1", n)
	}
	e.ok(remote("destroy", "--all", "--yes")...)
	cost := decode[map[string]any](t, e.ok(remote("cost", "--json")...).out)
	ledger := 0.0
	for _, le := range mkt.Ledger() {
		ledger += le.Amount
	}
	if got := cost["total"].(float64); got < ledger-0.01 || got > ledger+0.01 {
		t.Errorf("cost total $%.4f, simulator ledger (compute+storage+bandwidth) $%.4f: want agreement to the cent", got, ledger)
	}
}

// TestSimHostsFlag: the local market always puts a machine behind a
// running instance (its onstart.sh is written at boot), since instances
// outlive commands there; the in-process market (VASTFLEET_SIM_LOCAL=off)
// does so only with --sim-hosts, and without it the instance is a row.
func TestSimHostsFlag(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hosts := sim.HostsDir(filepath.Join(e.home, "sim"))
	rent := func(args ...string) string {
		offer := e.cheapestOffer("gpu_name=RTX_3090")
		inst := decode[map[string]any](t, e.ok(append(args, "rent", offer, "--image", "ubuntu:22.04", "--onstart", "echo hi", "--json")...).out)
		return fmt.Sprint(int64(inst["id"].(float64)))
	}
	for _, id := range []string{rent()} {
		b, err := os.ReadFile(filepath.Join(hosts, id, "root", "onstart.sh"))
		if err != nil || strings.TrimSpace(string(b)) != "echo hi" {
			t.Fatalf("onstart.sh of instance %s on the local market: %q, %v", id, b, err)
		}
	}
	e.ok("sim", "stop")
	e.vars = map[string]string{"VASTFLEET_SIM_LOCAL": "off"}
	id := rent("--sim-hosts")
	if b, err := os.ReadFile(filepath.Join(hosts, id, "root", "onstart.sh")); err != nil || strings.TrimSpace(string(b)) != "echo hi" {
		t.Fatalf("onstart.sh of instance %s with --sim-hosts: %q, %v", id, b, err)
	}
	id2 := rent()
	if _, err := os.Stat(filepath.Join(hosts, id2)); !os.IsNotExist(err) {
		t.Errorf("instance %s got a machine without --sim-hosts in process (%v)", id2, err)
	}
}

// ls prices an instance with the same rule as cost, earlier running
// stretches included: a stopped, restarted and destroyed instance shows one
// figure in both.
func TestLsCostIsCostsFigure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	offer := e.cheapestOffer("gpu_name=RTX_3090")
	inst := decode[map[string]any](t, e.ok("rent", offer, "--image", "ubuntu:22.04", "--json").out)
	id := fmt.Sprint(int64(inst["id"].(float64)))
	e.ok("stop", id)
	e.ok("start", id)
	e.ok("destroy", id, "--yes")
	ls := decode[[]map[string]any](t, e.ok("ls", "--all", "--json").out)
	cost := decode[struct {
		Instances []struct {
			InstanceID int64   `json:"id"`
			Compute    float64 `json:"compute"`
			Total      float64 `json:"total"`
		} `json:"instances"`
	}](t, e.ok("cost", "--json").out)
	if len(ls) != 1 || len(cost.Instances) != 1 {
		t.Fatalf("ls %v, cost %+v: want one instance each", ls, cost)
	}
	if cost.Instances[0].Compute <= 0 {
		t.Fatalf("the instance ran but cost shows no compute: %+v", cost.Instances[0])
	}
	if got, want := ls[0]["cost_so_far"].(float64), cost.Instances[0].Total; got != want {
		t.Fatalf("ls says $%v, cost says $%v for the same destroyed instance", got, want)
	}
}

// After the simulated market is reset, the instances the store remembers
// are gone, not ghosts running with a negative uptime.
func TestNoGhostsAfterSimReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("rent", e.cheapestOffer("gpu_name=RTX_3090"), "--image", "ubuntu:22.04")
	e.ok("sim", "reset")
	if ls := decode[[]map[string]any](t, e.ok("ls", "--json").out); len(ls) != 0 {
		t.Fatalf("after sim reset, ls shows %v", ls)
	}
	all := decode[[]map[string]any](t, e.ok("ls", "--all", "--json").out)
	if len(all) != 1 || all[0]["gone"] != true || all[0]["uptime_seconds"].(float64) < 0 {
		t.Fatalf("after sim reset, ls --all shows %v, want the instance gone with no negative uptime", all)
	}
}

// While a launch holds the data dir, `ls` still shows the fleet as the
// marketplace lists it now (here: stopped behind the store's back), and
// writes nothing: the store keeps what the holder recorded. ls never needs
// the writer lock, so it says nothing of it.
func TestLsWhileLockedShowsTheLiveListing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, srv := serveSim(t)
	remote := func(args ...string) []string { return append([]string{"--api-url", srv.URL}, args...) }
	inst := decode[map[string]any](t, e.ok(remote("rent", e.cheapestOffer("gpu_name=RTX_3090", "--api-url", srv.URL), "--image", "ubuntu:22.04", "--json")...).out)
	id := int64(inst["id"].(float64))
	before := decode[[]map[string]any](t, e.ok(remote("ls", "--json")...).out)

	l, err := store.AcquireLock(e.home, "vastfleet launch --count 300")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	c, err := vast.New(vast.Options{BaseURL: srv.URL, APIKey: sim.DefaultAPIKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StopInstance(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	r := e.ok(remote("ls", "--json")...)
	rows := decode[[]map[string]any](t, r.out)
	if len(rows) != 1 || rows[0]["state"] == before[0]["state"] || rows[0]["state"] == "running" {
		t.Fatalf("ls while locked: %v (before the stop: state %v); want the stop the marketplace lists", rows, before[0]["state"])
	}
	st, err := store.Open(t.Context(), filepath.Join(e.home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Instance(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State == rows[0]["state"] {
		t.Errorf("ls while locked wrote the store (state %q)", rec.State)
	}
}

// ls and cost look without writing, whether or not anyone holds the lock:
// they show what the marketplace lists now (a stop made behind the store's
// back, and its cost) while the store keeps what writers recorded, until
// `reconcile` records it.
func TestLsAndCostShowFreshStateAndNeverWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, srv := serveSim(t)
	remote := func(args ...string) []string { return append([]string{"--api-url", srv.URL}, args...) }
	inst := decode[map[string]any](t, e.ok(remote("rent", e.cheapestOffer("gpu_name=RTX_3090", "--api-url", srv.URL), "--image", "ubuntu:22.04", "--json")...).out)
	id := int64(inst["id"].(float64))
	e.ok(remote("reconcile")...)
	recorded := func() string {
		st, err := store.Open(t.Context(), filepath.Join(e.home, "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rec, err := st.Instance(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := st.Events(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s/%d events", rec.State, len(evs))
	}
	before := recorded()
	c, err := vast.New(vast.Options{BaseURL: srv.URL, APIKey: sim.DefaultAPIKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StopInstance(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	rows := decode[[]map[string]any](t, e.ok(remote("ls", "--json")...).out)
	if len(rows) != 1 || rows[0]["state"] != "stopped" {
		t.Fatalf("ls after a stop behind the store's back: %v, want it stopped", rows)
	}
	cost := decode[map[string]any](t, e.ok(remote("cost", "--json")...).out)
	insts, _ := cost["instances"].([]any)
	if len(insts) != 1 || insts[0].(map[string]any)["state"] != "stopped" {
		t.Fatalf("cost after the stop: %v, want the instance priced as stopped", cost["instances"])
	}
	if after := recorded(); after != before {
		t.Fatalf("ls and cost wrote the store: %s before, %s after", before, after)
	}
	e.ok(remote("reconcile")...)
	if after := recorded(); after == before || !strings.HasPrefix(after, "stopped/") {
		t.Fatalf("reconcile recorded %s (before %s), want the stop", after, before)
	}
}
