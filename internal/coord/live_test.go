package coord

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vastfleet/vastfleet/internal/wire"
)

func TestTotalsFollowHeartbeatAgeOnTheInjectedClock(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	costCalls := 0
	r := newRig(t, func(c *Config) {
		c.Clock = clk
		c.HeartbeatInterval = 10 * time.Second // stale after 30 s, dead after 100 s
		c.OrphanAfter = 30 * time.Minute
		c.OrphanPolicy = wire.PolicyDestroy
		c.Costs = func(ctx context.Context, fleet string) (float64, float64, map[int64]float64, error) {
			costCalls++
			if fleet != "alpha" {
				return 0, 0, nil, errors.New("unknown fleet")
			}
			return 1.25, 7.5, map[int64]float64{101: 0.5, 102: 0.75}, nil
		}
	})
	send := func(node string, id int64, cpu, cores float64, gpus []wire.GPU, keys float64) {
		t.Helper()
		hb := wire.Heartbeat{Fleet: "alpha", Node: node, InstanceID: id, CPUPercent: cpu, CPUCores: cores,
			RAMUsedBytes: 2 << 30, RAMTotalBytes: 8 << 30, GPUs: gpus,
			Metrics: map[string]float64{"keys_per_s": keys, "batches": 1}}
		var reply wire.HeartbeatReply
		if code, _ := r.do("POST", wire.PathHeartbeat, r.nodeAs(node, id), hb, &reply); code != 200 {
			t.Fatalf("heartbeat %s: %d", node, code)
		}
		if reply.IntervalS != 10 || reply.OrphanAfterS != 1800 || reply.OrphanPolicy != wire.PolicyDestroy {
			t.Fatalf("reply %+v", reply)
		}
	}
	send("dead", 100, 800, 8, nil, 5)
	clk.Advance(80 * time.Second)
	send("stale", 0, 1600, 16, nil, 7)
	clk.Advance(30 * time.Second) // dead: 110 s, stale: 30 s... one more second
	clk.Advance(time.Second)
	send("a1", 101, 12800, 128, []wire.GPU{{UtilPercent: 50}, {UtilPercent: 100}}, 1e6)
	send("a2", 102, 50, 4, []wire.GPU{{UtilPercent: 30}}, 2.5e6)

	var snap wire.Snapshot
	if code, _ := r.do("GET", wire.PathState, r.viewer, nil, &snap); code != 200 {
		t.Fatal(code)
	}
	tot := snap.Totals
	if tot.NodesAlive != 2 || tot.NodesStale != 1 || tot.NodesDead != 1 {
		t.Fatalf("alive/stale/dead = %d/%d/%d, want 2/1/1", tot.NodesAlive, tot.NodesStale, tot.NodesDead)
	}
	// Sums over alive nodes only.
	if tot.CPUPercent != 12850 || tot.CPUCores != 132 || tot.RAMUsedBytes != 4<<30 || tot.RAMTotalBytes != 16<<30 {
		t.Errorf("cpu %v cores %v ram %v/%v", tot.CPUPercent, tot.CPUCores, tot.RAMUsedBytes, tot.RAMTotalBytes)
	}
	if tot.GPUs != 3 || math.Abs(tot.GPUUtilAvg-60) > 1e-9 {
		t.Errorf("gpus %d util %v, want 3 and 60", tot.GPUs, tot.GPUUtilAvg)
	}
	if tot.Metrics["keys_per_s"] != 3.5e6 || tot.Metrics["batches"] != 2 {
		t.Errorf("metrics %v", tot.Metrics)
	}
	if tot.DPH != 1.25 || tot.Spent != 7.5 {
		t.Errorf("dph %v spent %v", tot.DPH, tot.Spent)
	}
	states := map[string]string{}
	for _, n := range snap.Nodes {
		states[n.Node] = n.State
		if n.Node == "a2" && n.DPH != 0.75 {
			t.Errorf("a2 $/hr %v", n.DPH)
		}
		// Delivery per $/hr: a1 gives 1e6/0.5 = 2e6 keys/s per $/hr, a2
		// 2.5e6/0.75 = 3.33e6; their median is 2.67e6. The dead node's
		// price is unknown here, so it has no figure.
		switch n.Node {
		case "a1":
			if math.Abs(n.PerDPH["keys_per_s"]-2e6) > 1e-3 || math.Abs(n.PerDPHShare["keys_per_s"]-0.75) > 1e-9 {
				t.Errorf("a1 per $/hr %v, share %v", n.PerDPH, n.PerDPHShare)
			}
		case "a2":
			if math.Abs(n.PerDPHShare["keys_per_s"]-1.25) > 1e-9 {
				t.Errorf("a2 share %v", n.PerDPHShare)
			}
		case "dead", "stale":
			if n.PerDPH != nil || n.PerDPHShare != nil {
				t.Errorf("%s has delivery figures without a price: %v %v", n.Node, n.PerDPH, n.PerDPHShare)
			}
		}
	}
	want := map[string]string{"dead": StateDead, "stale": StateStale, "a1": StateAlive, "a2": StateAlive}
	for n, s := range want {
		if states[n] != s {
			t.Errorf("%s is %q, want %q", n, states[n], s)
		}
	}
	if snap.Nodes[0].Node != "a1" {
		t.Errorf("nodes not sorted by name: %v", snap.Nodes[0].Node)
	}
	// A stale node that reports again is alive again.
	send("stale", 0, 1600, 16, nil, 7)
	r.do("GET", wire.PathState, r.viewer, nil, &snap)
	if snap.Totals.NodesAlive != 3 || snap.Totals.Metrics["keys_per_s"] != 3.500007e6 {
		t.Errorf("after the stale node reports: alive %d keys %v", snap.Totals.NodesAlive, snap.Totals.Metrics["keys_per_s"])
	}
	// Costs are asked once per CostsEvery, not per request.
	if costCalls != 1 {
		t.Errorf("Costs called %d times within 5 s, want 1", costCalls)
	}
}

func TestMetricsEndpointParses(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	r.do("POST", wire.PathHeartbeat, r.node("n1"), heartbeat("alpha", "n1"), nil)
	r.do("POST", wire.PathHeartbeat, r.node("n2"), heartbeat("alpha", "n2"), nil)
	r.do("POST", wire.PathFindings, r.node("n1"), findings("alpha", "n1", "k1", "k2"), nil)
	r.do("POST", wire.PathFindings, r.node("n1"), findings("alpha", "n1", "k2"), nil)

	req, _ := http.NewRequest("GET", r.http.URL+wire.PathMetrics, nil)
	req.Header.Set("Authorization", "Bearer "+r.viewer)
	resp, err := r.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		f := families[name]
		if f == nil {
			t.Fatalf("%s missing", name)
		}
	next:
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			}
		}
		t.Fatalf("%s%v missing", name, labels)
		return 0
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"vastfleet_nodes", map[string]string{"fleet": "alpha", "state": "alive"}, 2},
		{"vastfleet_nodes", map[string]string{"state": "dead"}, 0},
		{"vastfleet_cpu_percent", nil, 800},
		{"vastfleet_cpu_cores", nil, 16},
		{"vastfleet_ram_used_bytes", nil, 2 << 30},
		{"vastfleet_ram_total_bytes", nil, 32 << 30},
		{"vastfleet_gpus", nil, 0},
		{"vastfleet_findings_total", nil, 2},
		{"vastfleet_findings_duplicates_total", nil, 1},
		{"vastfleet_heartbeats_total", nil, 2},
		{"vastfleet_metric", map[string]string{"name": "keys_per_s"}, 2000},
	}
	for _, c := range checks {
		if got := value(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func testStateAndFindingsSurviveARestart(t *testing.T, backend string) {
	clk := newFakeClock()
	r := newRigOn(t, backend, func(c *Config) { c.Clock = clk })
	r.do("POST", wire.PathHeartbeat, r.node("n1"), heartbeat("alpha", "n1"), nil)
	var ack wire.FindingsAck
	if code, _ := r.do("POST", wire.PathFindings, r.node("n1"), findings("alpha", "n1", "k1", "k2", "k3"), &ack); code != 200 || ack.Stored != 3 {
		t.Fatalf("%d %+v", code, ack)
	}
	r.http.Close()
	r.srv.Close() // saves the nodes written behind
	r.db.Close()

	r.db = r.store.open(t)
	clk.Advance(40 * time.Second)
	r.start(func(c *Config) { c.Clock = clk })
	var snap wire.Snapshot
	r.do("GET", wire.PathState, r.viewer, nil, &snap)
	if snap.Totals.Findings != 3 || len(snap.Findings) != 3 || snap.Findings[0].Key != "k3" {
		t.Fatalf("after restart: %d findings, list %+v", snap.Totals.Findings, snap.Findings)
	}
	if len(snap.Nodes) != 1 || snap.Nodes[0].Node != "n1" || snap.Nodes[0].State != StateStale || snap.Nodes[0].CPUPercent != 400 {
		t.Fatalf("last known node after restart: %+v", snap.Nodes)
	}
	// The agent did not hear the ack and sends again: acked, not stored.
	ack = wire.FindingsAck{}
	r.do("POST", wire.PathFindings, r.node("n1"), findings("alpha", "n1", "k1", "k2", "k3", "k4"), &ack)
	if ack.Stored != 1 || ack.Duplicates != 3 || len(ack.Acked) != 4 {
		t.Fatalf("replay after restart: %+v", ack)
	}
	if rows, distinct := countRows(t, r.db, "alpha"); rows != 4 || distinct != 4 {
		t.Fatalf("%d rows, %d distinct, want 4", rows, distinct)
	}
}

func TestDashboardSwapsTheLinkTokenForACookie(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	c := r.http.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	get := func(path string, cookie *http.Cookie) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", r.http.URL+path, nil)
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := get("/", nil); resp.StatusCode != 401 {
		t.Errorf("no token: %d", resp.StatusCode)
	}
	if resp := get("/?token="+r.agent, nil); resp.StatusCode != 401 {
		t.Errorf("agent token as a viewer: %d", resp.StatusCode)
	}
	link := DashboardURL(r.http.URL+"/", r.viewer)
	if link != r.http.URL+"/?token="+r.viewer {
		t.Fatalf("DashboardURL = %q", link)
	}
	resp := get(strings.TrimPrefix(link, r.http.URL), nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("link: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == viewerCookie {
			cookie = ck
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v", cookie)
	}
	resp = get("/", cookie)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("with cookie: %d", resp.StatusCode)
	}
	for _, id := range []string{`id="nodes-alive"`, `id="findings-count"`, `id="items-done"`, `id="items-left"`, `id="node-table"`, `id="findings-list"`, `id="metric-tiles"`} {
		if !strings.Contains(string(body), id) {
			t.Errorf("page lacks %s", id)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	if strings.Contains(string(body), "http://") || strings.Contains(string(body), "https://") {
		t.Error("the page loads something from another origin")
	}
	// The cookie also reads the API, so EventSource needs no header.
	if resp := get(wire.PathState, cookie); resp.StatusCode != 200 {
		t.Errorf("state with cookie: %d", resp.StatusCode)
	}
	js := get("/static/app.js", nil)
	src, _ := io.ReadAll(js.Body)
	if js.StatusCode != 200 || !strings.Contains(string(src), "EventSource") {
		t.Fatalf("app.js: %d", js.StatusCode)
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "http://", "https://"} {
		if strings.Contains(string(src), bad) {
			t.Errorf("app.js uses %s", bad)
		}
	}
	if css := get("/static/style.css", nil); css.StatusCode != 200 {
		t.Errorf("style.css: %d", css.StatusCode)
	}
}

func TestAgentBinaryIsServedToAgents(t *testing.T) {
	t.Parallel()
	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	r := newRig(t, func(c *Config) {
		c.AgentBinary = func() (io.ReadCloser, string, error) {
			return io.NopCloser(strings.NewReader("\x7fELF binary")), sum, nil
		}
	})
	for path, want := range map[string]string{wire.PathAgentBin: "\x7fELF binary", wire.PathAgentSum: sum + "\n"} {
		req, _ := http.NewRequest("GET", r.http.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+r.agent)
		resp, err := r.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != want {
			t.Errorf("%s: %d %q", path, resp.StatusCode, b)
		}
	}
}

func TestHistoryKeepsTenMinutesOfTotals(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	r := newRig(t, func(c *Config) { c.Clock = clk; c.PushEvery = time.Hour })
	ctx := context.Background()
	for i := range historyPoints + 10 {
		hb := heartbeat("alpha", "n1")
		hb.Metrics = map[string]float64{"keys_per_s": float64(i)}
		r.do("POST", wire.PathHeartbeat, r.node("n1"), hb, nil)
		r.srv.sampleHistory(ctx)
		r.srv.sampleHistory(ctx) // no time passed: no second sample
		clk.Advance(historyEvery)
	}
	var h []HistoryPoint
	if code, _ := r.do("GET", PathHistory, r.viewer, nil, &h); code != 200 {
		t.Fatal(code)
	}
	if len(h) != historyPoints {
		t.Fatalf("%d points, want %d", len(h), historyPoints)
	}
	if h[0].Metrics["keys_per_s"] != 10 || h[len(h)-1].Metrics["keys_per_s"] != historyPoints+9 || h[0].NodesAlive != 1 || h[0].CPUPercent != 400 {
		t.Fatalf("first %+v last %+v", h[0], h[len(h)-1])
	}
	if code, _ := r.do("GET", PathHistory, r.agent, nil, nil); code != 403 {
		t.Errorf("agent reads history: %d", code)
	}
}

func TestMarketDepthIsDrawnForViewersAndCached(t *testing.T) {
	t.Parallel()
	calls := 0
	r := newRig(t, func(c *Config) {
		c.MarketDepth = func(context.Context) ([]byte, error) {
			calls++
			return []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`), nil
		}
	})
	for range 3 {
		if code, _ := r.do("GET", PathDepth, r.viewer, nil, nil); code != 200 {
			t.Fatalf("viewer GET %s: %d", PathDepth, code)
		}
	}
	if calls != 1 {
		t.Errorf("the depth was drawn %d times for 3 views, want once", calls)
	}
	if code, _ := r.do("GET", PathDepth, r.agent, nil, nil); code != 403 && code != 401 {
		t.Errorf("agent token GET %s: %d, want refused", PathDepth, code)
	}
}

// TestFindingsShowTheCoordinatorsClock: a finding carries the time the
// coordinator received it, on the coordinator's clock (the market's on a
// simulated market), whatever the node stamped or claimed, live and
// after a restart; the snapshot names which clock that is.
func testFindingsShowTheCoordinatorsClock(t *testing.T, backend string) {
	clk := newFakeClock()
	r := newRigOn(t, backend, func(c *Config) { c.Clock = clk })
	fs := findings("alpha", "n1", "k1")
	skewed := clk.Now().Add(-3 * time.Hour)
	fs.Items[0].At = skewed
	fs.Items[0].ReceivedAt = clk.Now().Add(time.Hour) // a node's claim, not kept
	r.do("POST", wire.PathFindings, r.node("n1"), fs, nil)
	received := clk.Now()
	check := func(when string) {
		t.Helper()
		var snap wire.Snapshot
		r.do("GET", wire.PathState, r.viewer, nil, &snap)
		if snap.Clock != "market" {
			t.Errorf("%s: snapshot clock %q, want market", when, snap.Clock)
		}
		if len(snap.Findings) != 1 || !snap.Findings[0].ReceivedAt.Equal(received) || !snap.Findings[0].At.Equal(skewed) {
			t.Fatalf("%s: findings %+v, want received_at %v and the node's at %v", when, snap.Findings, received, skewed)
		}
	}
	check("live")
	r.http.Close()
	r.srv.Close()
	r.db.Close()
	r.db = r.store.open(t)
	clk.Advance(time.Minute)
	r.start(func(c *Config) { c.Clock = clk })
	check("after a restart")

	wall := newRigOn(t, backend, nil)
	var snap wire.Snapshot
	wall.do("GET", wire.PathState, wall.viewer, nil, &snap)
	if snap.Clock != "wall" {
		t.Errorf("a coordinator on the wall clock says %q", snap.Clock)
	}
}
