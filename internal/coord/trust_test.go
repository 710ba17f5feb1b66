package coord

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// Trust benchmark (issue 23), over real HTTP against a real coordinator
// on a real SQLite file. The default run is the whole campaign with one
// seed; VASTFLEET_TRUST_BENCH=N repeats the liar campaign over N seeds
// and reports the mean figures:
//
//	go test -run 'TestForgedRequests|TestLiarCampaign' -v ./internal/coord
//	VASTFLEET_TRUST_BENCH=20 go test -run TestLiarCampaign -v ./internal/coord

// httpNode is a test-side agent: its credential and a client.
type httpNode struct {
	name, token string
	url         string
	c           *http.Client
}

func (n *httpNode) post(t testing.TB, path string, body, out any) int {
	t.Helper()
	return postJSON(t, n.c, n.url+path, n.token, body, out)
}

func postJSON(t testing.TB, c *http.Client, url, token string, body, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %q: %v", url, raw, err)
		}
	}
	return resp.StatusCode
}

// fleetMembers is a mutable membership: fleet → instance → machine.
type fleetMembers struct {
	mu  sync.Mutex
	set map[string]map[int64]Instance
}

func (m *fleetMembers) Instances(_ context.Context, fleet string) (map[int64]Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int64]Instance{}
	for id, in := range m.set[fleet] {
		out[id] = in
	}
	return out, nil
}

func (m *fleetMembers) add(fleet string, id, machine int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.set == nil {
		m.set = map[string]map[int64]Instance{}
	}
	if m.set[fleet] == nil {
		m.set[fleet] = map[int64]Instance{}
	}
	m.set[fleet][id] = Instance{MachineID: machine, Image: "img"}
}

func (m *fleetMembers) remove(fleet string, id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.set[fleet], id)
}

// A hostile caller holding the fleet's bootstrap token, or the credential
// of an instance it runs, forges 200 results for items it does not hold,
// and heartbeats, findings and leases in another node's name: none is
// accepted (before credentials, 200 of 200 forged results were stored),
// the honest node then gets every item, and each refusal is counted
// against the sender on /metrics.
func testForgedRequestsAreRefused(t *testing.T, backend string) {
	ctx := context.Background()
	members := &fleetMembers{}
	members.add("alpha", 1, 101) // honest
	members.add("alpha", 2, 102) // mallory's own instance
	r := newRigOn(t, backend, func(c *Config) { c.Members = members })
	values := make([]string, 200)
	for i := range values {
		values[i] = "item-" + strconv.Itoa(i)
	}
	if err := r.db.AddItems(ctx, "alpha", values); err != nil {
		t.Fatal(err)
	}
	honest := r.enroll("alpha", r.agent, 1, "honest")
	mallory := r.enroll("alpha", r.agent, 2, "mallory")
	// The honest node holds item 1 when the forgeries arrive.
	var held wire.ItemLease
	if code, _ := r.do("POST", wire.PathItemsLease, honest, wire.ItemLeaseRequest{Fleet: "alpha", Session: "work"}, &held); code != 200 || held.Item == nil {
		t.Fatalf("honest lease: %d %+v", code, held)
	}

	accepted, tried := 0, 0
	try := func(what, path, token string, body any, want int) {
		t.Helper()
		tried++
		code, _ := r.do("POST", path, token, body, nil)
		if code/100 == 2 {
			accepted++
		}
		if code != want {
			t.Errorf("%s: %d, want %d", what, code, want)
		}
	}
	for i := range 200 {
		id := int64(i + 1)
		forged := wire.ItemResult{Fleet: "alpha", ID: id, Lease: "1", ExitCode: 0, StdoutTail: "forged"}
		try("bootstrap token result", wire.PathItemsResult, r.agent, forged, http.StatusForbidden)
		forged.Node = "honest"
		try("stolen credential, result in honest's name", wire.PathItemsResult, mallory, forged, http.StatusForbidden)
		forged.Node = ""
		try("stolen credential, result for an item it does not hold", wire.PathItemsResult, mallory, forged, http.StatusForbidden)
	}
	hb := heartbeat("alpha", "honest")
	try("bootstrap heartbeat", wire.PathHeartbeat, r.agent, hb, http.StatusForbidden)
	try("heartbeat in honest's name", wire.PathHeartbeat, mallory, hb, http.StatusForbidden)
	try("findings in honest's name", wire.PathFindings, mallory, findings("alpha", "honest", "forged-1"), http.StatusForbidden)
	try("bootstrap findings", wire.PathFindings, r.agent, findings("alpha", "honest", "forged-2"), http.StatusForbidden)
	try("lease in honest's name", wire.PathItemsLease, mallory, wire.ItemLeaseRequest{Fleet: "alpha", Node: "honest", Session: "work"}, http.StatusForbidden)
	try("second enrollment of honest's instance", wire.PathEnroll, r.agent, wire.EnrollRequest{Fleet: "alpha", InstanceID: 1, Node: "evil"}, http.StatusConflict)
	try("enrolling under honest's name", wire.PathEnroll, r.agent, wire.EnrollRequest{Fleet: "alpha", InstanceID: 2, Node: "honest"}, http.StatusConflict)
	try("enrolling an instance outside the fleet", wire.PathEnroll, r.agent, wire.EnrollRequest{Fleet: "alpha", InstanceID: 77}, http.StatusForbidden)
	if accepted != 0 {
		t.Fatalf("%d of %d forged requests accepted", accepted, tried)
	}
	t.Logf("forged requests accepted: %d of %d (%d forged results)", accepted, tried, 600)

	// Nothing forged reached the store, and the honest node gets all 200.
	if _, _, done, _ := r.db.ItemCounts(ctx, "alpha"); done != 0 {
		t.Fatalf("%d items done by forgeries", done)
	}
	if n, _ := r.db.CountFindings(ctx, "alpha"); n != 0 {
		t.Fatalf("%d forged findings stored", n)
	}
	got := 0
	for lease := held; lease.Item != nil; got++ {
		var ack wire.ItemResultAck
		if code, _ := r.do("POST", wire.PathItemsResult, honest, wire.ItemResult{Fleet: "alpha", ID: lease.Item.ID, Lease: lease.Lease, StdoutTail: "ok"}, &ack); code != 200 || !ack.Stored {
			t.Fatalf("honest result %d: %d %+v", lease.Item.ID, code, ack)
		}
		lease = wire.ItemLease{}
		r.do("POST", wire.PathItemsLease, honest, wire.ItemLeaseRequest{Fleet: "alpha", Session: "work"}, &lease)
	}
	if got != 200 {
		t.Fatalf("the honest node ran %d items, want 200", got)
	}
	snap := r.srv.Snapshot(ctx, "alpha")
	r.do("POST", wire.PathHeartbeat, mallory, heartbeat("alpha", "mallory"), nil)
	snap = r.srv.Snapshot(ctx, "alpha")
	for _, n := range snap.Nodes {
		if n.Node == "mallory" && n.Refused != 403 {
			t.Errorf("mallory's refusals on the dashboard: %d, want 403", n.Refused)
		}
	}
	req, _ := http.NewRequest("GET", r.http.URL+wire.PathMetrics, nil)
	req.Header.Set("Authorization", "Bearer "+r.viewer)
	resp, err := r.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `vastfleet_refused_total{fleet="alpha",node="mallory"} 403`) {
		t.Errorf("metrics lack mallory's 403 refusals:\n%s", body)
	}

	// A destroyed instance's credential is revoked: refused from then
	// on, and the instance id may enroll again (a replacement).
	members.remove("alpha", 2)
	r.srv.revokeGone(ctx)
	if code, _ := r.do("POST", wire.PathHeartbeat, mallory, heartbeat("alpha", "mallory"), nil); code != http.StatusUnauthorized {
		t.Fatalf("revoked credential: %d, want 401", code)
	}
	members.add("alpha", 2, 102)
	time2 := r.enroll("alpha", r.agent, 2, "mallory")
	if time2 == mallory {
		t.Fatal("re-enrollment gave the revoked credential back")
	}
	// Credentials are kept hashed.
	var plain int
	if err := r.db.db.QueryRowContext(t.Context(), `SELECT count(*) FROM credentials WHERE token_hash = ? OR token_hash = ?`, honest, mallory).Scan(&plain); err != nil || plain != 0 {
		t.Fatalf("a plain credential is in coord.db (%d, %v)", plain, err)
	}
}

// campaign is one liar campaign's figures.
type campaign struct {
	items, runs, wrong int
	liars              []int64 // the always-lying machines
	hosts              []HostResults
}

// badSink records what the coordinator puts on the bad-host list.
type badSink struct {
	mu  sync.Mutex
	got map[int64]string
}

func (b *badSink) MarkBad(_ context.Context, machine int64, reason string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.got == nil {
		b.got = map[int64]string{}
	}
	b.got[machine] = reason
	return nil
}

func answer(v string) string {
	s := sha256.Sum256([]byte(v))
	return hex.EncodeToString(s[:])
}

// liarNodes: of nodes machines, the first liars always lie (each its own
// wrong answer: they do not collude), the next flaky are wrong with
// probability flakyRate; the rest are honest.
const (
	campaignNodes = 40
	campaignLiars = 2 // 5 %
	campaignFlaky = 1 // the 1 % of nodes, rounded up to one
	flakyRate     = 0.01
)

// runCampaign runs one job of n items on the coordinator at url: every
// node in turn leases an item and reports its answer (a deterministic
// order, so a seed gives one outcome), until every node is told that
// nothing is left or is refused as a caught liar.
func runCampaign(t testing.TB, srv *Server, url string, db *DB, members *fleetMembers, fleet string, firstID int64, n int, v Validation, seed uint64) campaign {
	t.Helper()
	ctx := context.Background()
	bootstrap, _, err := db.FleetTokens(ctx, fleet)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetValidation(ctx, fleet, v); err != nil {
		t.Fatal(err)
	}
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf("%s-%d", fleet, i)
	}
	if err := db.AddItems(ctx, fleet, values); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{}
	nodes := make([]*httpNode, campaignNodes)
	for i := range nodes {
		members.add(fleet, firstID+int64(i), int64(1000+i)) // the same machines job after job
	}
	for i := range nodes {
		id := firstID + int64(i)
		var rep wire.EnrollReply
		name := fmt.Sprintf("%s-n%02d", fleet, i)
		if code := postJSON(t, c, url+wire.PathEnroll, bootstrap, wire.EnrollRequest{Fleet: fleet, InstanceID: id, Node: name}, &rep); code != 200 {
			t.Fatalf("enroll %s: %d", name, code)
		}
		nodes[i] = &httpNode{name: name, token: rep.Token, url: url, c: c}
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	done := make([]bool, len(nodes))
	for left := len(nodes); left > 0; {
		progress := false
		for i, nd := range nodes {
			if done[i] {
				continue
			}
			var l wire.ItemLease
			switch code := nd.post(t, wire.PathItemsLease, wire.ItemLeaseRequest{Fleet: fleet, Session: "work"}, &l); {
			case code == http.StatusNoContent || code == http.StatusForbidden:
				done[i] = true
				left--
				progress = true
				continue
			case code != 200:
				t.Fatalf("%s lease: %d", nd.name, code)
			}
			if l.Item == nil {
				continue
			}
			progress = true
			out := answer(l.Item.Value)
			switch {
			case i < campaignLiars:
				out = "lie-" + nd.name + "-" + l.Item.Value
			case i < campaignLiars+campaignFlaky && rng.Float64() < flakyRate:
				out = "flaky-" + l.Item.Value
			}
			var ack wire.ItemResultAck
			if code := nd.post(t, wire.PathItemsResult, wire.ItemResult{Fleet: fleet, Session: "work", ID: l.Item.ID, Lease: l.Lease, StdoutTail: out}, &ack); code != 200 {
				t.Fatalf("%s result: %d", nd.name, code)
			}
		}
		if !progress {
			t.Fatalf("the campaign is stuck: no node can lease an item")
		}
	}
	res, err := db.ItemResults(ctx, fleet)
	if err != nil {
		t.Fatal(err)
	}
	camp := campaign{items: n}
	if len(res) != n {
		t.Fatalf("%d of %d items done", len(res), n)
	}
	for _, r := range res {
		if r.StdoutTail != answer(r.Value) {
			camp.wrong++
		}
	}
	if _, camp.runs, err = db.Runs(ctx, fleet); err != nil {
		t.Fatal(err)
	}
	if camp.hosts, err = db.HostResults(ctx, fleet); err != nil {
		t.Fatal(err)
	}
	for i := range campaignLiars {
		camp.liars = append(camp.liars, int64(1000+i))
	}
	return camp
}

// newCampaignCoord is a coordinator with a seeded coin for adaptive
// replication and a bad-host sink.
func newCampaignCoord(t testing.TB, seed uint64) (*Server, string, *DB, *fleetMembers, *badSink) {
	t.Helper()
	db := openTestDB(t, filepath.Join(t.TempDir(), "coord.db"))
	t.Cleanup(func() { db.Close() })
	members, sink := &fleetMembers{}, &badSink{}
	coin := rand.New(rand.NewPCG(seed, 11))
	srv, err := New(Config{DB: db, Members: members, BadHosts: sink, TokenRate: 1e9, Rand: coin.Float64})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return srv, hs.URL, db, members, sink
}

// On a 300-item job with 5 % of the nodes always lying and one wrong 1 %
// of the time: no wrong result is kept, every always-lying machine ends
// on the bad-host list, and adaptive replication costs a fraction of the
// plain 2-of-2 replication beside it once hosts have earned trust (the
// first job on new machines replicates nearly everything: a host needs
// TrustAfter agreeing results first).
func TestLiarCampaign(t *testing.T) {
	t.Parallel()
	items := 300
	if testing.Short() {
		items = 100
	}
	seeds := 1
	if s := os.Getenv("VASTFLEET_TRUST_BENCH"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("VASTFLEET_TRUST_BENCH=%q: want a number of seeds", s)
		}
		seeds = n
	}
	var sumCold, sumWarm, sumPlain, wrongAll float64
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		// Adaptive: a first job on fresh machines, then a second job on
		// the same machines (trust is per machine and image).
		srv, url, db, members, sink := newCampaignCoord(t, seed)
		cold := runCampaign(t, srv, url, db, members, "job1", 1, items, Validation{Mode: ValidateAdaptive}, seed)
		warm := runCampaign(t, srv, url, db, members, "job2", 101, items, Validation{Mode: ValidateAdaptive}, seed+1000)
		// Plain 2-of-2 on its own fresh coordinator.
		psrv, purl, pdb, pmembers, psink := newCampaignCoord(t, seed)
		plain := runCampaign(t, psrv, purl, pdb, pmembers, "plain", 1, items, Validation{Mode: ValidateReplicas, Replicas: 2, Quorum: 2}, seed)

		for _, c := range []struct {
			name string
			camp campaign
			sink *badSink
		}{{"adaptive, first job", cold, sink}, {"adaptive, second job", warm, sink}, {"2-of-2", plain, psink}} {
			ratio := float64(c.camp.runs) / float64(items)
			t.Logf("seed %d, %s: %d runs for %d items = %.3fx the honest job; %d wrong kept; caught %v",
				seed, c.name, c.camp.runs, items, ratio, c.camp.wrong, c.sink.got)
			if c.camp.wrong > 0 && seeds == 1 {
				t.Errorf("%s: %d wrong results kept, want 0", c.name, c.camp.wrong)
			}
			wrongAll += float64(c.camp.wrong)
			for _, m := range c.camp.liars {
				if _, ok := c.sink.got[m]; !ok {
					t.Errorf("%s: always-lying machine %d is not on the bad-host list", c.name, m)
				}
			}
		}
		for _, h := range cold.hosts {
			t.Logf("  first job, %s (%s): %d validated, %d rejected, %d unchecked %s", h.Host, h.Nodes, h.Validated, h.Rejected, h.Unchecked, h.Caught)
		}
		// Trust is earned after K validated results per machine: the
		// short run's 100 items over 40 machines give each too few to
		// earn it, so only the full run holds the second job to 1.15x.
		if ratio := float64(warm.runs) / float64(items); ratio > 1.15 && !testing.Short() {
			t.Errorf("adaptive, second job: %.3fx the honest job's compute, want <= 1.15x", ratio)
		}
		sumCold += float64(cold.runs) / float64(items)
		sumWarm += float64(warm.runs) / float64(items)
		sumPlain += float64(plain.runs) / float64(items)
	}
	n := float64(seeds)
	t.Logf("over %d seed(s): compute adaptive first job %.3fx, second job %.3fx, 2-of-2 %.3fx; wrong kept %.4f%% of items",
		seeds, sumCold/n, sumWarm/n, sumPlain/n, 100*wrongAll/(3*float64(items)*n))
	if wrongAll/(3*float64(items)*n) > 0.001 {
		t.Errorf("wrong results kept: %.4f%% of items, want <= 0.1%%", 100*wrongAll/(3*float64(items)*n))
	}
}
