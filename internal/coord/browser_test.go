package coord

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// pageFigures is what the dashboard page measured of itself.
type pageFigures struct {
	Rows      int     `json:"rows"`
	Updates   int     `json:"updates"`
	MaxGapMS  float64 `json:"max_gap_ms"`
	RenderP99 float64 `json:"render_p99_ms"`
	HeapMB    float64 `json:"heap_mb"`
}

// TestDashboardKeepsUpWithALargeFleet opens the dashboard in headless
// Chromium on a fleet of VASTFLEET_DASH_NODES nodes (100 here; 1,000 by
// hand) whose agents report every VASTFLEET_DASH_INTERVAL (1 s here; 10 s,
// the default, by hand), and measures, in the page, the time to the first
// full table, how often it updates, how long a render takes and the page's
// heap. It holds the table to one row per node and a changed node to show;
// the goal figures (an update at least once a second) are printed, not
// asserted, since the machine is shared.
//
//	VASTFLEET_DASH_NODES=1000 VASTFLEET_DASH_INTERVAL=10s go test -run TestDashboardKeepsUpWithALargeFleet -v ./internal/coord
func TestDashboardKeepsUpWithALargeFleet(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("drives Chromium")
	}
	var browser string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("no Chromium on PATH (.ci/run installs Debian's chromium)")
	}
	nodes, interval, watch := 100, time.Second, 6*time.Second
	if v, err := strconv.Atoi(os.Getenv("VASTFLEET_DASH_NODES")); err == nil && v > 0 {
		nodes, watch = v, 20*time.Second
	}
	if v, err := time.ParseDuration(os.Getenv("VASTFLEET_DASH_INTERVAL")); err == nil && v > 0 {
		interval = v
	}
	rig := newHBRig(t, sqliteBackend, nodes)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	beat := func(a int, seq int64, keys float64) {
		hb := benchHeartbeat(a)
		hb.Seq, hb.SentAt, hb.Metrics = seq, time.Now(), map[string]float64{"keys_per_s": keys}
		body, _ := json.Marshal(hb)
		if err := rig.post(wire.PathHeartbeat, body); err != nil && ctx.Err() == nil {
			t.Errorf("heartbeat: %v", err)
		}
	}
	for a := range nodes {
		beat(a, 1, 1000)
	}
	go func() { // the agents, spread evenly over the interval
		tick := time.NewTicker(interval / time.Duration(nodes))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			beat(i%nodes, int64(2+i/nodes), 1000*float64(2+i/nodes))
		}
	}()

	bctx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.Headless, chromedp.WindowSize(1280, 1000))...)
	defer cancel()
	bctx, cancel = chromedp.NewContext(bctx)
	defer cancel()
	bctx, cancel = context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	err := chromedp.Do(bctx,
		chromedp.Navigate(rig.hs.URL+"/?token="+rig.viewer),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#node-table tbody tr[data-node]").length === `+strconv.Itoa(nodes),
			chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)),
	)
	if err != nil {
		t.Fatalf("the dashboard never showed %d rows: %v", nodes, err)
	}
	firstTable := time.Since(start)
	before, err := chromedp.Run(bctx, chromedp.Text("#metric-keys_per_s"))
	if err != nil {
		t.Fatal(err)
	}
	// The page says which clock its times are on.
	if updated, err := chromedp.Run(bctx, chromedp.Text("#updated")); err != nil || !strings.HasSuffix(updated, " wall time") {
		t.Errorf("the updated line %q (%v) does not name its clock", updated, err)
	}
	// From here the page times itself: each change of "updated", and how
	// long the script ran for it.
	_, err = chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => {
		window.__updates = [];
		window.__renders = [];
		const before = performance.now();
		new MutationObserver(() => window.__updates.push(performance.now())).observe(
			document.getElementById("updated"), {childList: true, characterData: true, subtree: true});
		new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__renders.push(e.duration); })
			.observe({type: "longtask", buffered: false});
		return before >= 0;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(watch)
	fig, err := chromedp.Run(bctx, chromedp.Evaluate[pageFigures](`(() => {
		const u = window.__updates;
		let gap = 0;
		for (let i = 1; i < u.length; i++) gap = Math.max(gap, u[i] - u[i-1]);
		const r = window.__renders.slice().sort((a, b) => a - b);
		const rows = document.querySelectorAll("#node-table tbody tr[data-node]");
		return {
			rows: rows.length, updates: u.length, max_gap_ms: gap,
			render_p99_ms: r.length ? r[Math.min(r.length - 1, Math.floor(0.99 * r.length))] : 0,
			heap_mb: performance.memory ? performance.memory.usedJSHeapSize / 1048576 : 0,
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d nodes reporting every %s: first full table after %s; %d updates in %s, longest gap %.0f ms; long tasks p99 %.0f ms; JS heap %.1f MB",
		nodes, interval, firstTable.Round(time.Millisecond), fig.Updates, watch, fig.MaxGapMS, fig.RenderP99, fig.HeapMB)
	if fig.Rows != nodes {
		t.Errorf("%d rows after the updates, want one per node (%d)", fig.Rows, nodes)
	}
	if fig.Updates < int(watch/time.Second)/3 {
		t.Errorf("%d updates in %s", fig.Updates, watch)
	}
	// The page follows the heartbeats: each round raises every node's
	// metric by a thousand.
	after, err := chromedp.Run(bctx, chromedp.Text("#metric-keys_per_s"))
	if err != nil || after == before {
		t.Errorf("the metric total went from %q to %q (%v)", before, after, err)
	}
}
