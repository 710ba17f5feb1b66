package sim

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/clock"
)

// cliInstance rents one instance that runs an onstart, on a market with
// hosts, and returns its id once its onstart has printed.
func cliInstance(t *testing.T, h *harness) int64 { return cliInstanceAt(t, h, 0) }

// cliInstanceAt is cliInstance on the n-th cheapest offer, for tests that
// need several instances.
func cliInstanceAt(t *testing.T, h *harness, n int) int64 {
	t.Helper()
	offers := h.search(fmt.Sprintf(`{"limit": %d, "rentable": {"eq": true}, "order": [["dph_total", "asc"]]}`, n+1))
	var out struct {
		NewContract int64 `json:"new_contract"`
	}
	if st, _, b := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", offers[n].ID), map[string]any{
		"client_id": "me", "image": "ubuntu:22.04", "disk": 10, "runtype": "ssh_direc ssh_proxy",
		"onstart": "touch hasbooted; echo onstart says hello $CONTAINER_ID"}, &out); st != 200 {
		t.Fatalf("create: %d %s", st, b)
	}
	for i := 0; h.show(out.NewContract).Status() != "running"; i++ {
		if i > 1000 {
			t.Fatal("never running")
		}
		h.clock.Advance(10 * time.Second)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(h.m.hosts.LogPath(out.NewContract))
		if strings.Contains(string(b), "onstart says hello") {
			return out.NewContract
		}
		if time.Now().After(deadline) {
			t.Fatalf("onstart never printed: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func publicKeyLine(t *testing.T) (string, gossh.Signer) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, _ := gossh.NewSignerFromKey(priv)
	sp, _ := gossh.NewPublicKey(pub)
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(sp))) + " cli@test", s
}

// pyQuery encodes query args as the CLI's apiurl does: strings with
// quote_plus, everything else JSON-encoded with Python's default
// separators first.
func pyQuery(args [][2]any) string {
	var parts []string
	for _, kv := range args {
		var v string
		switch x := kv[1].(type) {
		case string:
			v = x
		case int:
			v = strconv.Itoa(x)
		default:
			b, _ := json.Marshal(x)
			v = strings.NewReplacer(`":`, `": `, `,"`, `, "`).Replace(string(b))
		}
		parts = append(parts, kv[0].(string)+"="+url.QueryEscape(v))
	}
	return strings.Join(parts, "&")
}

// TestVastCLIRequests sends exactly what the official vastai CLI sends for
// `ssh-url ID`, `attach ssh ID KEY`, `execute ID ls` and `logs ID`
// (vast-cli 5567983, vast.py), and reads the answers as it does.
func TestVastCLIRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 21, HostDir: t.TempDir()})
	defer h.m.Close()
	id := cliInstance(t, h)

	// ssh-url: every page of /api/v1/instances/, then ports["22/tcp"].
	var rows []map[string]any
	params := [][2]any{{"select_filters", map[string]any{}}, {"order_by", []map[string]string{{"col": "id", "dir": "asc"}}}, {"limit", 25}}
	for {
		var page struct {
			Instances []map[string]any `json:"instances"`
			NextToken *string          `json:"next_token"`
		}
		if st, _, b := h.do("GET", "/api/v1/instances/?"+pyQuery(params), nil, &page); st != 200 {
			t.Fatalf("v1 listing: %d %s", st, b)
		}
		rows = append(rows, page.Instances...)
		if page.NextToken == nil || *page.NextToken == "" {
			break
		}
		params = append(params, [2]any{"after_token", *page.NextToken})
	}
	var row map[string]any
	for _, r := range rows {
		if r["id"] == float64(id) {
			row = r
		}
	}
	if row == nil {
		t.Fatalf("instance %d not in the listing", id)
	}
	if _, ok := row["start_date"].(float64); !ok {
		t.Errorf("row lacks a numeric start_date: %v", row["start_date"])
	}
	if _, ok := row["extra_env"].([]any); !ok {
		t.Errorf("row lacks extra_env as a list: %v", row["extra_env"])
	}
	ports := row["ports"].(map[string]any)
	hp := ports["22/tcp"].([]any)[0].(map[string]any)["HostPort"].(string)
	sshURL := fmt.Sprintf("ssh://root@%s:%s", row["public_ipaddr"], hp)
	if !strings.HasPrefix(sshURL, "ssh://root@127.0.0.1:") {
		t.Fatalf("ssh-url would print %s", sshURL)
	}

	// attach ssh ID KEY, then the key gets in at that address.
	line, signer := publicKeyLine(t)
	var att map[string]any
	if st, _, b := h.do("POST", fmt.Sprintf("/api/v0/instances/%d/ssh/", id), map[string]string{"ssh_key": line}, &att); st != 200 || att["success"] != true {
		t.Fatalf("attach: %d %s", st, b)
	}
	c, err := gossh.Dial("tcp", strings.TrimPrefix(sshURL, "ssh://root@"), &gossh.ClientConfig{User: "root",
		Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)}, HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("ssh with the attached key: %v", err)
	}
	c.Close()

	// execute ID ls and logs ID: a result_url polled without a key.
	poll := func(resultURL string) string {
		for i := 0; i < 100; i++ {
			r, err := http.Get(resultURL)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode == 200 {
				return string(b)
			}
			time.Sleep(30 * time.Millisecond)
		}
		t.Fatalf("%s never ready", resultURL)
		return ""
	}
	var ex struct {
		Success       bool   `json:"success"`
		ResultURL     string `json:"result_url"`
		WriteablePath string `json:"writeable_path"`
	}
	if st, _, b := h.do("PUT", fmt.Sprintf("/api/v0/instances/command/%d/", id), map[string]string{"command": "ls"}, &ex); st != 200 || !ex.Success {
		t.Fatalf("execute: %d %s", st, b)
	}
	if out := strings.ReplaceAll(poll(ex.ResultURL), ex.WriteablePath, ""); !strings.Contains(out, "hasbooted") || !strings.Contains(out, "onstart.sh") {
		t.Errorf("execute ls printed %q", out)
	}
	var lg struct {
		Success   bool   `json:"success"`
		ResultURL string `json:"result_url"`
	}
	if st, _, b := h.do("PUT", fmt.Sprintf("/api/v0/instances/request_logs/%d/", id), map[string]any{}, &lg); st != 200 || !lg.Success {
		t.Fatalf("logs: %d %s", st, b)
	}
	if out := poll(lg.ResultURL); !strings.Contains(out, fmt.Sprintf("onstart says hello %d", id)) {
		t.Errorf("logs printed %q", out)
	}
}

// TestOfficialVastCLI runs the official vastai CLI itself against a served
// simulator, when its vast.py is named (python3 with requests needed):
//
//	VASTFLEET_VAST_CLI=/path/to/vast-cli/vast.py go test -run TestOfficialVastCLI -v ./internal/sim
func TestOfficialVastCLI(t *testing.T) {
	t.Parallel()
	script := os.Getenv("VASTFLEET_VAST_CLI")
	if script == "" {
		t.Skip("set VASTFLEET_VAST_CLI to the official CLI's vast.py")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	clk := clock.NewManual(t0)
	m, err := New(Config{Seed: 21, Offers: 800, Clock: clk, APIKey: testKey, HostDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- m.ServeListener(ctx, ln) }()
	defer func() { cancel(); <-served }()
	base := "http://" + ln.Addr().String()
	h := &harness{t: t, m: m, clock: clk, srv: nil, key: testKey}
	h.base = base
	id := cliInstance(t, h)

	home := t.TempDir()
	vastai := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(py, append([]string{script, "--url", base, "--api-key", testKey}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
			"XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "VAST_URL="+base)
		out, err := cmd.CombinedOutput()
		t.Logf("$ vastai %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("vastai %v: %v", args, err)
		}
		return string(out)
	}
	idArg := strconv.FormatInt(id, 10)
	out := vastai("ssh-url", idArg)
	if !strings.Contains(out, "ssh://root@127.0.0.1:") {
		t.Errorf("ssh-url: %q", out)
	}
	line, signer := publicKeyLine(t)
	if out := vastai("attach", "ssh", idArg, line); !strings.Contains(out, "'success': True") {
		t.Errorf("attach ssh: %q", out)
	}
	addr := out[strings.Index(out, "ssh://root@")+len("ssh://root@"):]
	addr = strings.TrimSpace(strings.SplitN(addr, "\n", 2)[0])
	c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: "root",
		Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)}, HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("ssh %s with the key vastai attached: %v", addr, err)
	}
	c.Close()
	if out := vastai("execute", idArg, "ls"); !strings.Contains(out, "hasbooted") {
		t.Errorf("execute ls: %q", out)
	}
	if out := vastai("logs", idArg); !strings.Contains(out, "onstart says hello "+idArg) {
		t.Errorf("logs: %q", out)
	}
	// Billing history: the window is the simulated days, not the wall
	// clock's last seven the CLI defaults to.
	h.clock.Advance(2 * time.Hour)
	from, to := strconv.FormatInt(t0.Add(-24*time.Hour).Unix(), 10), strconv.FormatInt(t0.Add(48*time.Hour).Unix(), 10)
	if out := vastai("show", "invoices-v1", "--charges", "-s", from, "-e", to, "--raw"); !strings.Contains(out, `"source": "instance-`+idArg+`"`) {
		t.Errorf("show invoices-v1 --charges: %q", out)
	}
	if out := vastai("show", "invoices-v1", "--invoices", "-s", from, "-e", to, "--raw"); !strings.Contains(out, `"type": "credit"`) {
		t.Errorf("show invoices-v1 --invoices: %q", out)
	}
	day := func(d time.Duration) string { return t0.Add(d).Format(time.DateOnly) }
	if out := vastai("show", "invoices", "-s", day(-24*time.Hour), "-e", day(48*time.Hour), "--raw"); !strings.Contains(out, `"type": "charge"`) {
		t.Errorf("show invoices: %q", out)
	}
}
