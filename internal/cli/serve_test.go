package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/localmarket"
	"github.com/vastfleet/vastfleet/internal/server"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// itemsJob writes a task file whose n items each print one finding
// naming the item, from a workdir sent with the job.
// An item waits for the file gate, when one is given.
func itemsJob(t *testing.T, name string, count, items int, gate string) string {
	t.Helper()
	dir := t.TempDir()
	wd := filepath.Join(dir, "work")
	os.MkdirAll(wd, 0o755)
	wait := ""
	if gate != "" {
		wait = "while [ ! -e " + gate + " ]; do sleep 0.1; done\n"
	}
	os.WriteFile(filepath.Join(wd, "item.sh"), []byte(wait+"printf '{\"found\":{\"n\":%s}}\\n' \"$1\"\nsleep 0.2\necho did $1\n"), 0o644)
	file := filepath.Join(dir, "job.yaml")
	os.WriteFile(file, fmt.Appendf(nil, `name: %s
query: "rentable=True num_gpus=1 dph_total<1"
count: %d
deadline: 30m
image: ubuntu:22.04
workdir: work
items: 0..%d
run: sh item.sh {item}
max_duration: 4h
`, name, count, items-1), 0o644)
	return file
}

// client is a command line of its own (its own home) talking to a server
// with a token.
func client(t *testing.T, token string) *env {
	c := newEnv(t)
	c.vars = map[string]string{"VASTFLEET_TOKEN": token}
	return c
}

var servingOn = regexp.MustCompile(`serving on (http://\S+)`)

// serverJob is a job's status on the server (url "": the current
// context's).
func serverJob(t *testing.T, c *env, url, id string) jobStatus {
	t.Helper()
	args := []string{"status", id, "--json"}
	if url != "" {
		args = append([]string{"--server", url}, args...)
	}
	rows := decode[[]jobStatus](t, c.ok(args...).out)
	if len(rows) != 1 {
		t.Fatalf("status %s: %+v", id, rows)
	}
	return rows[0]
}

// TestServeTwoUsersOneJob: a server on loopback runs an operator's job on
// the simulator to its end; a viewer sees the same job and its dashboard,
// is refused (403) submit, launch, destroy and down, and once its token is
// revoked gets 401 saying so; the operator ends a second job with down; a
// client of another version is told; the audit log says who did what.
func TestServeTwoUsersOneJob(t *testing.T) {
	needAgentTools(t)
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	opTok := strings.TrimSpace(e.ok("serve", "token", "create", "ann", "--role", "operator").out)
	viewTok := strings.TrimSpace(e.ok("serve", "token", "create", "vic", "--role", "viewer").out)
	out, _ := e.startCmd("serve", "--addr", "127.0.0.1:0", "--agent-bin", agentBin)
	var url string
	waitFor(t, "the server", 30*time.Second, func() bool {
		m := servingOn.FindStringSubmatch(out.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	})
	// The operator talks to the server through a context, the viewer
	// with --server and VASTFLEET_TOKEN.
	op, viewer := newEnv(t), client(t, viewTok)
	tokFile := filepath.Join(t.TempDir(), "ann.token")
	os.WriteFile(tokFile, []byte(opTok+"\n"), 0o600)
	op.ok("context", "add", "lab", url, "--token-file", tokFile)
	ctxs := decode[[]map[string]any](t, op.ok("context", "ls", "--json").out)
	if len(ctxs) != 2 || ctxs[1]["name"] != "lab" || ctxs[1]["current"] != true || ctxs[1]["has_token"] != true {
		t.Errorf("contexts: %v", ctxs)
	}
	if fi, err := os.Stat(filepath.Join(op.home, "config", "contexts.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("contexts file: %v %v", fi.Mode(), err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	file := itemsJob(t, "shared", 2, 12, gate)

	if r := viewer.fails("--server", url, "up", file); !strings.Contains(r.err, "role viewer may not submit") {
		t.Errorf("viewer up: exit %d %s", r.code, r.err)
	}
	id := strings.TrimSpace(op.ok("up", file, "--detach").out)
	for _, args := range [][]string{{"destroy", "--all", "--yes"}, {"launch", "--count", "1", "rentable=True"}, {"down", id}} {
		r := viewer.fails(append([]string{"--server", url}, args...)...)
		if !strings.Contains(r.err, "role viewer may not "+args[0]) {
			t.Errorf("viewer %s: exit %d %s", args[0], r.code, r.err)
		}
	}
	if a, b := serverJob(t, op, "", id), serverJob(t, viewer, url, id); a.ID != id || b.ID != id {
		t.Errorf("operator sees %+v, viewer %+v", a, b)
	}
	// The items wait at the gate: the job runs while both look at its
	// dashboard, which the server serves from its own address.
	waitFor(t, "the job to run", 3*time.Minute, func() bool { return serverJob(t, viewer, url, id).State == "running" })
	for _, tok := range []string{viewTok, opTok} {
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar}
		page, err := browser.Get(url + "/dashboard/" + id + "/?token=" + tok)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(page.Body)
		page.Body.Close()
		state, err := browser.Get(url + "/api/v1/state")
		if err != nil {
			t.Fatal(err)
		}
		snap, _ := io.ReadAll(state.Body)
		state.Body.Close()
		if page.StatusCode != 200 || !strings.Contains(string(body), "<html") || state.StatusCode != 200 || !strings.Contains(string(snap), `"totals"`) {
			t.Errorf("dashboard through the server: page %d (%.80q), state %d %.200q", page.StatusCode, body, state.StatusCode, snap)
		}
	}
	if resp, err := http.Get(url + "/api/v1/state"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("dashboard state without a token: %v %v", resp.StatusCode, err)
	}
	os.WriteFile(gate, nil, 0o600)
	waitFor(t, "the job to finish", 3*time.Minute, func() bool { return serverJob(t, viewer, url, id).State == "done" })
	st := serverJob(t, viewer, url, id)
	items := strings.Count(readFile(t, filepath.Join(e.home, "serve", "results", id, "items.jsonl")), "\n")
	if st.Live != 0 || items != 12 {
		t.Errorf("done with %d live instances, %d item results (want 0, 12)", st.Live, items)
	}
	if ls := op.ok("ls", "--json"); strings.Contains(ls.out, `"state": "running"`) {
		t.Errorf("instances left: %s", ls.out)
	}
	// The viewer downloads the job's results; a second download into the
	// same place, and a job named as a path, are refused here.
	to := t.TempDir()
	if r := viewer.ok("--server", url, "results", id, "--to", to); strings.TrimSpace(r.out) != filepath.Join(to, id) {
		t.Errorf("results printed %q", r.out)
	}
	if got := strings.Count(readFile(t, filepath.Join(to, id, "items.jsonl")), "\n"); got != 12 {
		t.Errorf("downloaded %d item results, want 12", got)
	}
	if r := viewer.fails("--server", url, "results", id, "--to", to); !strings.Contains(r.err, "never overwrites") {
		t.Errorf("a second download into the same place: exit %d %s", r.code, r.err)
	}
	if r := viewer.fails("--server", url, "results", "../x", "--to", to); r.code != 2 {
		t.Errorf("a job named as a path: exit %d %s", r.code, r.err)
	}
	// A second job, ended by down while its items wait: its up on the
	// server stops with the nodes kept, then down collects, destroys and
	// reports to the client that asked.
	gate2 := filepath.Join(t.TempDir(), "gate")
	id2 := strings.TrimSpace(op.ok("up", itemsJob(t, "ended", 1, 4, gate2), "--detach").out)
	waitFor(t, "the second job to run", 3*time.Minute, func() bool { return serverJob(t, op, "", id2).State == "running" })
	if r := op.ok("down", id2); !strings.Contains(r.out, "cost report for job "+id2) || !strings.Contains(r.out, "instances still live 0") {
		t.Errorf("down through the server:\n%s\n%s", r.out, r.err)
	}
	if st := serverJob(t, viewer, url, id2); st.State != "done" || st.Live != 0 {
		t.Errorf("after down: %+v", st)
	}
	// --server local (or context use local) runs here, on this client's
	// own empty data dir.
	if ls := op.ok("--server", "local", "ls", "--json"); strings.TrimSpace(ls.out) != "[]" {
		t.Errorf("--server local: %s", ls.out)
	}

	// The marketplace key the server uses is in nothing a client gets.
	for _, c := range []*env{op, viewer} {
		for _, args := range [][]string{{"status", "--json"}, {"ls", "--all", "--json"}, {"cost", "--json"}, {"logs", id, "--json"}} {
			if c == viewer {
				args = append([]string{"--server", url}, args...)
			}
			r := c.run(args...)
			if strings.Contains(r.out+r.err, sim.DefaultAPIKey) {
				t.Errorf("%v sent the API key to a client", args)
			}
		}
	}
	e.ok("serve", "token", "revoke", "vic")
	if r := viewer.fails("--server", url, "status"); !strings.Contains(r.err, "API token revoked") {
		t.Errorf("revoked viewer: exit %d %s", r.code, r.err)
	}
	req, _ := http.NewRequest(http.MethodGet, url+"/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+opTok)
	req.Header.Set(server.HeaderVersion, "v0.0.1-other")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body["error"], "the client is v0.0.1-other") {
		t.Errorf("other version: %d %v", resp.StatusCode, body)
	}
	audit := decode[[]server.AuditEntry](t, e.ok("serve", "audit", "--json").out)
	var got []string
	for _, a := range audit {
		got = append(got, a.Who+" "+a.Action+" "+a.Outcome)
	}
	want := []string{"vic submit denied", "ann submit queued", "vic destroy denied", "vic launch denied", "vic down denied",
		"vic dashboard opened", "ann dashboard opened", "vic results sent", "ann submit queued", "ann down exit 0"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestServeSurvivesKill9: kill -9 the server mid-job, with items and
// findings flowing, and start it again on the same data dir: the job is
// resumed (the agents come back to its coordinator), the client that
// submitted it follows it through the restart to its end, no item or
// finding is lost, no instance is left, and the cost report agrees with
// the simulator's ledger to the cent.
func TestServeSurvivesKill9(t *testing.T) {
	h := newServeHarness(t)
	h.Global = append(h.Global, "--sim-speed", "60", "--sim-faults", "none")
	op := h.operator()
	addr := freeAddr(t)
	url := "http://" + addr
	srv := h.start(addr)

	const items = 30
	id, doneAtKill, followed := submitUntilItemsFlow(t, op, url, h.home, itemsJob(t, "durable", 3, items, ""), "--json")
	h.kill9(srv)
	t.Logf("killed the server with %d of %d items done", doneAtKill, items)
	h.start(addr)

	upRes := followed(h.logPath)
	if upRes.code != 0 {
		t.Fatalf("up through the restart: exit %d\nstdout:\n%s\nstderr:\n%s\nserver log:\n%s", upRes.code, upRes.out, upRes.err, readFile(t, h.logPath))
	}
	if !strings.Contains(upRes.err, "resuming it") {
		t.Errorf("the client did not see the job resumed:\n%s", upRes.err)
	}
	served, err := os.ReadFile(filepath.Join(h.home, "sim", localmarket.URLFile))
	if err != nil {
		t.Fatal(err)
	}
	checkServedJobEnd(t, op, url, id, h.home, strings.TrimSpace(string(served)), items)
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestServeTLSPinned: a server on TLS prints its certificate's pin; a
// context with the pin talks to it, one with another pin is refused
// before any token is sent.
func TestServeTLSPinned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := strings.TrimSpace(e.ok("serve", "token", "create", "ann", "--role", "viewer").out)
	out, errOut := e.startCmd("serve", "--addr", "127.0.0.1:0", "--tls")
	var url, pin string
	pinRe := regexp.MustCompile(`pin: ([0-9a-f]{64})`)
	httpsOn := regexp.MustCompile(`serving on (https://\S+)`)
	waitFor(t, "the server", 30*time.Second, func() bool {
		m, p := httpsOn.FindStringSubmatch(out.String()), pinRe.FindStringSubmatch(errOut.String())
		if m != nil && p != nil {
			url, pin = m[1], p[1]
		}
		return url != ""
	})
	tokFile := filepath.Join(t.TempDir(), "tok")
	os.WriteFile(tokFile, []byte(tok), 0o600)
	good, bad := newEnv(t), newEnv(t)
	good.ok("context", "add", "lab", url, "--token-file", tokFile, "--pin", pin)
	bad.ok("context", "add", "lab", url, "--token-file", tokFile, "--pin", strings.Repeat("0", 64))
	if r := good.ok("status", "--json"); strings.TrimSpace(r.out) != "[]" {
		t.Errorf("status over TLS: %q", r.out)
	}
	if r := bad.fails("status"); !strings.Contains(r.err, "certificate") {
		t.Errorf("wrong pin: exit %d %s", r.code, r.err)
	}
	if r := e.fails("serve", "--addr", "0.0.0.0:0"); r.code != 2 || !strings.Contains(r.err, "add --tls") {
		t.Errorf("a public address without TLS: exit %d %s", r.code, r.err)
	}
}

// checkServedJobEnd: the server's job id ended done with nothing live and
// no instance left, its cost agrees with the market's ledger to the cent,
// and each of its items has a result and a finding.
func checkServedJobEnd(t *testing.T, op *env, url, id, home, marketURL string, items int) {
	t.Helper()
	st := serverJob(t, op, url, id)
	if st.State != "done" || st.Live != 0 {
		t.Errorf("after the restart: %+v", st)
	}
	if ls := op.ok("--server", url, "ls", "--json"); strings.TrimSpace(ls.out) != "[]" {
		t.Errorf("instances left after the job (orphans): %s", ls.out)
	}
	// Money: what vastfleet reports is what the market billed.
	cost := decode[map[string]any](t, op.ok("--server", url, "cost", "--json").out)
	resp, err := http.Get(marketURL + "/sim/ledger")
	if err != nil {
		t.Fatal(err)
	}
	var ledger struct {
		Total float64 `json:"total"`
	}
	json.NewDecoder(resp.Body).Decode(&ledger)
	resp.Body.Close()
	if got := cost["total"].(float64); got < ledger.Total-0.01 || got > ledger.Total+0.01 || got == 0 {
		t.Errorf("cost total $%.4f, the simulator's ledger $%.4f: want agreement to the cent", got, ledger.Total)
	}
	t.Logf("cost $%.4f, ledger $%.4f", cost["total"].(float64), ledger.Total)
	res := filepath.Join(home, "serve", "results", id)
	seenItems := map[string]int{}
	for _, line := range lines(t, filepath.Join(res, "items.jsonl")) {
		var it struct {
			Value string `json:"value"`
		}
		json.Unmarshal([]byte(line), &it)
		seenItems[it.Value]++
	}
	seenFinds := map[float64]int{}
	for _, line := range lines(t, filepath.Join(res, "findings.jsonl")) {
		var f struct {
			Data struct {
				N float64 `json:"n"`
			} `json:"data"`
		}
		json.Unmarshal([]byte(line), &f)
		seenFinds[f.Data.N]++
	}
	if len(seenItems) != items || len(seenFinds) != items {
		t.Errorf("%d distinct item results, %d distinct findings; want %d each\nitems %v\nfindings %v", len(seenItems), len(seenFinds), items, seenItems, seenFinds)
	}
	dup := 0
	for _, n := range seenFinds {
		dup += n - 1
	}
	t.Logf("0 lost: %d items, %d findings (%d found twice: items run again after their lease ran out)", len(seenItems), len(seenFinds), dup)
}

// TestServeRestoresFromItsReplica: a server replicating its data dir
// (serve --replicate) is killed with SIGKILL mid-job and its data dir
// deleted, as when its machine is lost. A server started on an empty data
// dir with --restore-from, on the same address and coordinator address,
// brings the data dir back and resumes the job: its agents find their
// coordinator (same address, same certificate), the client's up follows
// the job to its end, and no item, finding or dollar is lost. The market
// is served apart, as vast.ai is: it outlives the controller.
func TestServeRestoresFromItsReplica(t *testing.T) {
	h := newServeHarness(t)
	marketURL := startServedMarket(t, h.bin)
	addr, coordAddr := freeAddr(t), freeAddr(t)
	url := "http://" + addr
	replicaURL := "file://" + filepath.Join(t.TempDir(), "replica")
	h.Global = append(h.Global, "--market", "sim", "--api-url", marketURL)
	h.Serve = []string{"--coord-addr", coordAddr}
	op := h.operator()
	srv := h.start(addr, "--replicate", replicaURL)

	const items = 30
	id, doneAtKill, followed := submitUntilItemsFlow(t, op, url, h.home, itemsJob(t, "moved", 3, items, ""), "--jq", `"\(.job) \(.items_done)"`)
	h.kill9(srv)
	// The machine is gone: nothing of its data dir is left.
	if err := os.RemoveAll(h.home); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the server with %d of %d items done, and deleted its data dir", doneAtKill, items)
	h.start(addr, "--restore-from", replicaURL)

	upRes := followed(h.logPath)
	if upRes.code != 0 {
		t.Fatalf("up through the restore: exit %d\nstdout:\n%s\nstderr:\n%s\nserver log:\n%s", upRes.code, upRes.out, upRes.err, readFile(t, h.logPath))
	}
	// --jq ran over the server's report here, as over a local up's.
	if got := strings.TrimSpace(upRes.out); got != fmt.Sprintf("%s %d", id, items) {
		t.Errorf("up --jq printed %q, want %q", got, fmt.Sprintf("%s %d", id, items))
	}
	if log := readFile(t, h.logPath); !strings.Contains(log, "restored "+h.home+" from "+replicaURL) {
		t.Errorf("the server did not say it restored:\n%s", log)
	}
	checkServedJobEnd(t, op, url, id, h.home, marketURL, items)
}

// freeAddr is a loopback address free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServedMarket serves a simulated market apart (as vast.ai is: it
// outlives the controller), with no faults at 60x, until the test ends,
// and returns its URL.
func startServedMarket(t *testing.T, bin string) string {
	t.Helper()
	marketAddr := freeAddr(t)
	marketURL := "http://" + marketAddr
	market := exec.Command(bin, "sim", "serve", "--addr", marketAddr, "--faults", "none", "--time-scale", "60", "--state", filepath.Join(t.TempDir(), "market"))
	if err := market.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { market.Process.Signal(syscall.SIGTERM); market.Wait() })
	waitFor(t, "the market", 30*time.Second, func() bool {
		resp, err := http.Get(marketURL + "/sim/clock")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return marketURL
}

// submitUntilItemsFlow has op submit the task file to the server at url
// (whose data dir is home) and follow it with up's extra flags, and
// returns once at least 5 of its items are done: the job's id, the items
// done then, and followed, which waits (5 minutes at most, then fails
// with the server log at logPath) for the client's up to end.
func submitUntilItemsFlow(t *testing.T, op *env, url, home, file string, flags ...string) (id string, done int, followed func(logPath string) result) {
	t.Helper()
	var upRes result
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		upRes = op.run(append([]string{"--server", url, "up", file}, flags...)...)
	}()
	waitFor(t, "the job", 60*time.Second, func() bool {
		rows := decode[[]jobStatus](t, op.ok("--server", url, "status", "--json").out)
		if len(rows) == 1 {
			id = rows[0].ID
		}
		return id != ""
	})
	db, err := coord.OpenDB(context.Background(), filepath.Join(home, "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "items flowing", 3*time.Minute, func() bool {
		_, _, n, err := db.ItemCounts(context.Background(), id)
		done = n
		return err == nil && n >= 5
	})
	db.Close()
	return id, done, func(logPath string) result {
		t.Helper()
		select {
		case <-finished:
		case <-time.After(5 * time.Minute):
			t.Fatalf("the client's up did not end; server log:\n%s", readFile(t, logPath))
		}
		return upRes
	}
}
