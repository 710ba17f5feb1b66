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
// every command of the instance, ssh-key, api-key, copy, logs, invoice and
// charges families, and show user. Left out: prepay instance and show
// deposit (reserved instances), teams, clusters, volumes, serverless.
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
	// run is the CLI with a key; it fails the test on a non-zero exit or
	// on the CLI's own failure reports, which often exit 0.
	run := func(key string, args ...string) string {
		t.Helper()
		cmd := exec.Command(py, append([]string{script, "--url", base, "--api-key", key}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
			"XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "VAST_URL="+base)
		out, err := cmd.CombinedOutput()
		t.Logf("$ vastai %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("vastai %v: %v", args, err)
		}
		for _, bad := range []string{"traceback", "failed with error", "httperror", "rsync error"} {
			if strings.Contains(strings.ToLower(string(out)), bad) {
				t.Errorf("vastai %v printed %q", args, bad)
			}
		}
		return string(out)
	}
	vastai := func(args ...string) string { t.Helper(); return run(testKey, args...) }
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
	officialCLIFamilies(t, h, vastai, run, id)

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
	// search invoices hands back the rows it read, which only --raw
	// prints (without it the CLI exits with the list as its status).
	if out := vastai("search", "invoices", "--raw"); !strings.Contains(out, `"is_credit": true`) || !strings.Contains(out, `"service": "instance_charge"`) {
		t.Errorf("search invoices: %q", out)
	}
	if out := vastai("search", "invoices", "is_credit=false", "--raw"); strings.Contains(out, `"is_credit": true`) || !strings.Contains(out, `"amount_cents"`) {
		t.Errorf("search invoices is_credit=false: %q", out)
	}
}

// officialCLIFamilies runs every command of the instance, key, copy and
// account families through the official CLI, on instance id (running,
// kept) and on instances it makes and destroys.
func officialCLIFamilies(t *testing.T, h *harness, vastai func(...string) string, run func(string, ...string) string, id int64) {
	t.Helper()
	idArg := strconv.FormatInt(id, 10)
	waitRunning := func(n int64) {
		t.Helper()
		for i := 0; h.show(n).Status() != "running"; i++ {
			if i > 1000 {
				t.Fatalf("instance %d never running", n)
			}
			h.clock.Advance(10 * time.Second)
		}
		h.m.Sync()
	}
	newID := func(out string) int64 {
		t.Helper()
		i := strings.Index(out, `"new_contract": `)
		if i < 0 {
			t.Fatalf("no new_contract in %q", out)
		}
		n, _ := strconv.ParseInt(strings.TrimRight(strings.Fields(out[i+len(`"new_contract": `):])[0], ","), 10, 64)
		return n
	}

	// Listings and addresses.
	for _, args := range [][]string{{"show", "instances", "--raw"}, {"show", "instance", idArg, "--raw"}, {"show", "instances-v1", "--raw"}} {
		if out := vastai(args...); !strings.Contains(out, `"id": `+idArg) {
			t.Errorf("%v: %q", args, out)
		}
	}
	if out := vastai("scp-url", idArg); !strings.Contains(out, "scp://root@127.0.0.1:") {
		t.Errorf("scp-url: %q", out)
	}
	vastai("label", "instance", idArg, "cli-label")
	if l := h.show(id).Label; l == nil || *l != "cli-label" {
		t.Errorf("label instance: label is %v", l)
	}

	// Account SSH keys, and one attached to the instance for copy.
	keyFile, pub := copyKey(t)
	vastai("create", "ssh-key", pub, "-y")
	out := vastai("show", "ssh-keys", "--raw")
	i := strings.Index(out, `"id": `)
	if i < 0 || !strings.Contains(out, strings.Fields(pub)[1]) {
		t.Fatalf("show ssh-keys lacks the key: %q", out)
	}
	keyID := strings.TrimRight(strings.Fields(out[i+len(`"id": `):])[0], ",")
	if out := vastai("attach", "ssh", idArg, pub); !strings.Contains(out, "'success': True") {
		t.Errorf("attach ssh: %q", out)
	}

	// copy, both ways, with the CLI's own rsync over ssh.
	if _, err := exec.LookPath("rsync"); err == nil {
		local := t.TempDir()
		os.MkdirAll(filepath.Join(local, "data"), 0o755)
		os.WriteFile(filepath.Join(local, "data", "w.bin"), []byte("weights"), 0o644)
		vastai("copy", filepath.Join(local, "data"), idArg+":/workspace/", "-i", keyFile)
		if b, err := os.ReadFile(filepath.Join(h.m.HostDir(id), "data", "w.bin")); string(b) != "weights" {
			t.Errorf("copy up landed as %q, %v", b, err)
		}
		back := filepath.Join(t.TempDir(), "back")
		vastai("copy", "C."+idArg+":/workspace/data", back, "-i", keyFile)
		if b, err := os.ReadFile(filepath.Join(back, "data", "w.bin")); string(b) != "weights" {
			t.Errorf("copy down came back as %q, %v", b, err)
		}
	} else {
		t.Log("no rsync: copy to and from the user's machine not run")
	}

	// A second instance made by the CLI, for instance-to-instance copy
	// and every state change.
	offers := h.search(`{"limit": 2, "rentable": {"eq": true}, "order": [["dph_total", "asc"]]}`)
	two := newID(vastai("create", "instance", strconv.FormatInt(offers[1].ID, 10), "--image", "ubuntu:22.04", "--disk", "10", "--ssh", "--direct", "--raw"))
	twoArg := strconv.FormatInt(two, 10)
	waitRunning(two)
	os.MkdirAll(filepath.Join(h.m.HostDir(id), "direct"), 0o755)
	os.WriteFile(filepath.Join(h.m.HostDir(id), "direct", "d.txt"), []byte("direct"), 0o644)
	if out := vastai("copy", idArg+":/workspace/direct", twoArg+":/workspace/"); !strings.Contains(out, "Remote to Remote copy initiated") {
		t.Errorf("copy instance to instance: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(h.m.HostDir(two), "direct", "d.txt")); string(b) != "direct" {
		t.Errorf("instance-to-instance copy landed as %q, %v", b, err)
	}
	if out := vastai("cancel", "copy", twoArg); !strings.Contains(out, "Remote copy canceled") {
		t.Errorf("cancel copy: %q", out)
	}
	vastai("stop", "instance", twoArg)
	vastai("start", "instance", twoArg)
	waitRunning(two)
	vastai("stop", "instances", twoArg)
	vastai("start", "instances", twoArg)
	waitRunning(two)
	vastai("reboot", "instance", twoArg)
	vastai("recycle", "instance", twoArg)
	vastai("update", "instance", twoArg, "--onstart", "echo updated")
	vastai("destroy", "instance", twoArg)
	if st := h.stateOf(two); !st.Destroyed {
		t.Errorf("destroy instance: %+v", st)
	}
	// change bid needs an interruptible instance: one bidding well above
	// the offer's price, so that nothing outbids it meanwhile.
	bid := newID(vastai("create", "instance", strconv.FormatInt(offers[1].ID, 10), "--image", "ubuntu:22.04", "--disk", "10", "--ssh",
		"--bid_price", strconv.FormatFloat(offers[1].DPHTotal*3, 'f', 4, 64), "--raw"))
	bidArg := strconv.FormatInt(bid, 10)
	vastai("change", "bid", bidArg, "--price", strconv.FormatFloat(offers[1].DPHTotal*4, 'f', 4, 64))
	vastai("destroy", "instance", bidArg)
	gpu := strings.ReplaceAll(offers[0].GPUName, " ", "_")
	three := newID(vastai("launch", "instance", "-g", gpu, "-n", strconv.Itoa(offers[0].NumGPUs), "-i", "ubuntu:22.04", "--raw"))
	vastai("destroy", "instance", strconv.FormatInt(three, 10))

	vastai("delete", "ssh-key", keyID)
	if out := vastai("show", "ssh-keys", "--raw"); strings.Contains(out, strings.Fields(pub)[1]) {
		t.Errorf("delete ssh-key left it: %q", out)
	}

	// API keys: a scoped one works within its permissions, then not at all.
	perm := filepath.Join(t.TempDir(), "perm.json")
	os.WriteFile(perm, []byte(`{"api": {"instance_read": {}}}`), 0o644)
	out = vastai("create", "api-key", "--name", "reader", "--permission_file", perm)
	var scoped, scopedID string
	if i := strings.Index(out, "'key': '"); i >= 0 {
		scoped = strings.SplitN(out[i+len("'key': '"):], "'", 2)[0]
	}
	if i := strings.Index(out, "'id': "); i >= 0 {
		scopedID = strings.TrimRight(strings.Fields(out[i+len("'id': "):])[0], ",}")
	}
	if scoped == "" || scopedID == "" {
		t.Fatalf("create api-key: %q", out)
	}
	if out := vastai("show", "api-keys"); !strings.Contains(out, "reader") || strings.Contains(out, scoped) || strings.Contains(out, testKey) {
		t.Errorf("show api-keys: %q", out)
	}
	if out := vastai("show", "api-key", scopedID); !strings.Contains(out, "reader") || strings.Contains(out, scoped) {
		t.Errorf("show api-key: %q", out)
	}
	if out := run(scoped, "show", "instances", "--raw"); !strings.Contains(out, `"id": `+idArg) {
		t.Errorf("show instances with the scoped key: %q", out)
	}
	vastai("delete", "api-key", scopedID)

	// show user: the CLI drops api_key before printing.
	if out := vastai("show", "user", "--raw"); !strings.Contains(out, `"balance"`) || strings.Contains(out, testKey) {
		t.Errorf("show user: %q", out)
	}
	vastai("show", "user")
}
