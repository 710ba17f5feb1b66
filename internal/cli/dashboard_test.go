package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/server/pgtest"
)

// startCmd runs a long-lived command (a coordinator) in this process
// until the test ends.
func (e *env) startCmd(args ...string) (out, errOut *syncBuffer) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut = &syncBuffer{}, &syncBuffer{}
	ios := &iostreams.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut, Getenv: func(k string) string {
		if k == "VASTFLEET_HOME" {
			return e.home
		}
		if k == "VASTFLEET_CONFIG" {
			return filepath.Join(e.home, "config")
		}
		if v, ok := e.vars[k]; ok {
			return v
		}
		return ""
	}}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, ios, append([]string{"--sim-speed", e.speed, "--sim-faults", "none"}, args...))
	}()
	e.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			e.t.Errorf("vastfleet %s did not stop after its context ended", strings.Join(args, " "))
		}
	})
	return out, errOut
}

// Each binary a test runs is built once per test binary: tests run in
// parallel, and each linking its own copy cost seconds of a 2-core CI.
var (
	agentBuild     = onceBuild("github.com/vastfleet/vastfleet/cmd/vastfleet-agent", "vastfleet-agent")
	vastfleetBuild = onceBuild("github.com/vastfleet/vastfleet/cmd/vastfleet", "vastfleet")
)

// buildDir holds the binaries; TestMain removes it once every test has run.
var buildDir = sync.OnceValues(func() (string, error) { return os.MkdirTemp("", "vastfleet-cli-test-") })

func onceBuild(pkg, name string) func() (string, error) {
	return sync.OnceValues(func() (string, error) {
		dir, err := buildDir()
		if err != nil {
			return "", err
		}
		// Each binary in a folder of its own: vastfleet finds an agent
		// beside itself, and the quick start's test wants it built.
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			return "", err
		}
		bin := filepath.Join(dir, name, name)
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", name, err, out)
		}
		return bin, nil
	})
}

// vastfleetBinary is vastfleet as built, for tests that run it as a user
// does (or kill it with SIGKILL).
func vastfleetBinary(t *testing.T) string {
	t.Helper()
	bin, err := vastfleetBuild()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) {
	if os.Getenv(factory.RunAsMainEnv) == "1" {
		// The local market, started again as this program.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		code := Main(ctx, iostreams.System(), os.Args[1:])
		stop()
		os.Exit(code)
	}
	code := m.Run()
	if dir, err := buildDir(); err == nil {
		os.RemoveAll(dir)
	}
	pgtest.Stop()
	os.Exit(code)
}

// buildAgent is the agent binary, built once per test binary; a test
// that needs it is skipped where the agent's onstart cannot run (it
// fetches the binary with curl and checks it with sha256sum).
func buildAgent(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"curl", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the agent's onstart needs %s", tool)
		}
	}
	bin, err := agentBuild()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium on PATH (.ci/run installs Debian's chromium)")
	return ""
}

// TestDashboardShowsTheLiveFleet is the run phase end to end in a real
// browser: a coordinator, a launch whose every instance installs the agent
// from it, sessions that print a metric and a finding, and the dashboard in
// headless Chromium showing both nodes, the metric's total, the finding and
// the market depth plot.
func TestDashboardShowsTheLiveFleet(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the agent and drives Chromium")
	}
	browser := chromium(t)
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120" // heartbeats every 10 market seconds: 83 ms
	out, errOut := e.startCmd("coord", "--addr", "127.0.0.1:0", "--agent-bin", agentBin, "--fleet", "web")
	waitFor(t, "the coordinator", 30*time.Second, func() bool { return strings.Contains(out.String(), "web\t") })
	link := strings.TrimSpace(strings.SplitN(strings.SplitN(out.String(), "web\t", 2)[1], "\n", 2)[0])

	e.ok("launch", "--coord", "auto", "--count", "2", "--fleet", "web", "--image", "ubuntu:22.04", "--deadline", "30m",
		"--session", `work:echo '{"metric":"keys_per_s","value":1500}'; echo '{"found":{"key":"0xC0FFEE"}}'; while sleep 1; do echo '{"metric":"keys_per_s","value":1500}'; done`,
		"-n", "rentable=True num_gpus=1 dph_total<1")

	ctx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.Headless, chromedp.WindowSize(1280, 1000))...)
	defer cancel()
	ctx, cancel = chromedp.NewContext(ctx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	poll := func(js string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second))
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(link),
		poll(`(document.querySelector("#nodes-alive")||{}).textContent === "2"`),
		poll(`["3000", "3,000", "3.00k", "3k", "3.0k"].includes((document.querySelector("#metric-keys_per_s")||{}).textContent)`),
		poll(`(document.querySelector("#findings-list")||{textContent:""}).textContent.includes("0xC0FFEE")`),
		// Each node's delivery per $/hr and its share of the median node's.
		poll(`[...document.querySelectorAll("#node-table td")].filter((td) => /^keys_per_s \S+ \(\d+%\)$/.test(td.textContent)).length === 2`),
		poll(`!document.querySelector("#depth").hidden && document.querySelector("#depth-plot").naturalWidth > 0`),
	)
	if err != nil {
		t.Fatalf("dashboard: %v\ncoordinator stderr:\n%s", err, errOut.String())
	}
	text := func(sel string) string {
		v, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return strings.TrimSpace(v)
	}
	nodes, findings, metric := text("#nodes-alive"), text("#findings-count"), text("#metric-keys_per_s")
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(findings)); n < 2 {
		t.Errorf("findings count %q, want 2 (one per node)", findings)
	}
	path := filepath.Join(os.TempDir(), "vastfleet-dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard screenshot: %s (nodes alive %s, keys_per_s %s, findings %s)", path, nodes, metric, findings)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
