package cli

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/nodes"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// launchFleet rents n running instances as fleet name on the simulator.
func (e *env) launchFleet(name string, n int) {
	e.t.Helper()
	// Fifty rents take wall time; a slower clock keeps boots inside the deadline.
	speed := e.speed
	e.speed = "300"
	defer func() { e.speed = speed }()
	e.ok("launch", "--count", fmt.Sprint(n), "--deadline", "3h", "--fleet", name, "--image", "ubuntu:22.04",
		"-n", "rentable=True num_gpus=1 dph_total<1")
}

func TestExecOnFiftySimulatedNodesOneFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.launchFleet("f", 50)
	// Rank 17 fails; every node prints its rank variables.
	r := e.run("exec", "--fleet", "f", "--parallel", "16", "--json", "--",
		`echo "$VASTFLEET_NODE_RANK/$VASTFLEET_NUM_NODES $VASTFLEET_MASTER_ADDR $VASTFLEET_GPUS_PER_NODE"; [ "$VASTFLEET_NODE_RANK" != 17 ] || exit 7`)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3 (partial)\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
	}
	rows := decode[[]nodes.ExecRow](t, r.out)
	if len(rows) != 50 {
		t.Fatalf("%d rows, want 50", len(rows))
	}
	for i, row := range rows {
		want := 0
		if i == 17 {
			want = 7
		}
		if row.Rank != i || row.ExitCode != want || row.Error != "" || row.Node != fmt.Sprintf("f-node-%d", i) {
			t.Errorf("row %d: %+v, want exit %d", i, row, want)
		}
	}
	if !strings.Contains(r.err, "failed on 1 of 50 nodes") {
		t.Errorf("stderr %q", r.err)
	}

	// Live output is prefixed per node; the table names the failure.
	r = e.run("exec", "--fleet", "f", "--", `echo "rank $VASTFLEET_NODE_RANK"; [ "$VASTFLEET_NODE_RANK" != 3 ] || exit 5`)
	if r.code != 3 || !strings.Contains(r.out, "[f-node-3] rank 3\n") || !strings.Contains(r.out, "[f-node-49] rank 49\n") {
		t.Fatalf("exit %d, output:\n%s\n%s", r.code, r.out, r.err)
	}
	if !regexpLine(r.out, `f-node-3\s+\d+\s+5\s+`) {
		t.Errorf("table lacks node 3's exit 5:\n%s", r.out)
	}

	// --out writes one file per node.
	dir := t.TempDir()
	e.ok("exec", "--fleet", "f", "--out", dir, "--", "echo $VASTFLEET_NODE_NAME")
	if b, err := os.ReadFile(filepath.Join(dir, "f-node-42.log")); err != nil || string(b) != "f-node-42\n" {
		t.Errorf("f-node-42.log = %q, %v", b, err)
	}
}

func regexpLine(s, pattern string) bool {
	for _, l := range strings.Split(s, "\n") {
		if ok, _ := regexpMatch(pattern, l); ok {
			return true
		}
	}
	return false
}

// exec runs the user's command line through each node's shell, with its
// rank variables, and refuses a node whose host key is not the one pinned
// for it: that node fails, the rest run, and the pin stays as it was.
func TestExecThroughTheShellRefusesAChangedHostKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.launchFleet("k", 3)
	e.ok("exec", "--fleet", "k", "--", "true") // learns the host keys
	known := filepath.Join(e.home, "ssh", "known_hosts")
	before, err := os.ReadFile(known)
	if err != nil {
		t.Fatal(err)
	}
	alias := nodes.HostKeyAlias(mustInt(t, idOf(t, e, "k", 1)))
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := ssh.NewSignerFromKey(priv)
	var forged []string
	for _, l := range strings.Split(strings.TrimSpace(string(before)), "\n") {
		if strings.HasPrefix(l, alias+" ") {
			l = alias + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(other.PublicKey())))
		}
		forged = append(forged, l)
	}
	if err := os.WriteFile(known, []byte(strings.Join(forged, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	r := e.run("exec", "--fleet", "k", "--json", "--",
		`case $VASTFLEET_NODE_RANK in 2) echo "last of $VASTFLEET_NUM_NODES"; exit 9;; esac`)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3 (partial)\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
	}
	rows := decode[[]nodes.ExecRow](t, r.out)
	if len(rows) != 3 || rows[0].ExitCode != 0 || rows[0].Error != "" || rows[2].ExitCode != 9 || rows[2].Error != "" {
		t.Fatalf("rows %+v: want node 0 exit 0 and node 2 exit 9 (the shell's case and exit)", rows)
	}
	if !strings.Contains(rows[1].Error, "host key changed") || !strings.Contains(rows[1].Error, ssh.FingerprintSHA256(other.PublicKey())) {
		t.Errorf("node 1: %+v, want refused for its changed host key", rows[1])
	}
	if after, _ := os.ReadFile(known); string(after) != strings.Join(forged, "\n")+"\n" {
		t.Errorf("known_hosts changed by a refused node:\n%s", after)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestExportedSSHConfigWorksWithOpenSSH(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("OpenSSH client not installed")
	}
	e := newEnv(t)
	e.launchFleet("f", 4)
	// exec learns host keys and attaches the fleet key.
	e.ok("exec", "--fleet", "f", "--", "true")
	cfg := filepath.Join(t.TempDir(), "config")
	e.ok("export", "--fleet", "f", "--format", "ssh-config", "--out", cfg)
	out, err := exec.Command("ssh", "-G", "-F", cfg, "f-node-3").CombinedOutput()
	if err != nil {
		t.Fatalf("ssh -G: %v\n%s", err, out)
	}
	g := string(out)
	if !strings.Contains(g, "\nhostname 127.0.0.1\n") || !regexpLine(g, `^port \d+$`) || strings.Contains(g, "\nport 22\n") {
		t.Fatalf("ssh -G did not resolve the node:\n%s", g)
	}
	host := decode[[]map[string]any](t, e.ok("ls", "--fleet", "f", "--json").out)
	_ = host

	hf := e.ok("export", "--fleet", "f", "--format", "hostfile").out
	var hosts []string
	for _, l := range strings.Split(hf, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		// Open MPI hostfile syntax: NAME slots=N
		f := strings.Fields(l)
		if len(f) != 2 || !strings.HasPrefix(f[1], "slots=") {
			t.Errorf("hostfile line %q", l)
		}
		hosts = append(hosts, f[0])
	}
	if strings.Join(hosts, ",") != "f-node-0,f-node-1,f-node-2,f-node-3" {
		t.Errorf("hostfile hosts %v", hosts)
	}
	if m := e.ok("export", "--fleet", "f", "--format", "hostfile", "--mpich").out; !strings.Contains(m, "\nf-node-2:1\n") {
		t.Errorf("mpich hostfile:\n%s", m)
	}
	if tr := e.ok("export", "--fleet", "f", "--format", "torchrun").out; !strings.Contains(tr, "f-node-1: torchrun --nnodes=4 --node_rank=1 --nproc_per_node=1 --master_addr=127.0.0.1") || !strings.Contains(tr, "NAT") {
		t.Errorf("torchrun:\n%s", tr)
	}
	if env := e.ok("export", "--fleet", "f", "--format", "env").out; !strings.Contains(env, "# f-node-2") || !strings.Contains(env, "export VASTFLEET_NODE_RANK=2\n") {
		t.Errorf("env:\n%s", env)
	}
	p := strings.TrimSpace(e.ok("ssh", "--print", idOf(t, e, "f", 3)).out)
	if !strings.HasPrefix(p, "ssh -i ") || !strings.Contains(p, "HostKeyAlias=vastfleet-") {
		t.Errorf("ssh --print: %q", p)
	}
}

func idOf(t *testing.T, e *env, fleet string, rank int) string {
	t.Helper()
	rows := decode[[]map[string]any](t, e.ok("ls", "--fleet", fleet, "--json").out)
	ids := make([]int64, 0, len(rows))
	for _, r := range rows {
		ids = append(ids, int64(r["id"].(float64)))
	}
	sortInts(ids)
	return fmt.Sprint(ids[rank])
}

func regexpMatch(pattern, s string) (bool, error) { return regexp.MatchString(pattern, s) }

func sortInts(a []int64) { slices.Sort(a) }

// OpenSSH runs a command on a simulated node through the exported config
// (instances rented without --fleet are fleet "default"),
// with the host key vastfleet recorded (StrictHostKeyChecking=yes).
func TestOpenSSHThroughExportedConfig(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("OpenSSH client not installed")
	}
	mkt, err := sim.New(sim.Config{Seed: 3, APIKey: sim.DefaultAPIKey, TimeScale: 3000, HostDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer mkt.Close()
	srv := httptest.NewServer(mkt.Handler())
	defer srv.Close()
	e := newEnv(t)
	at := func(args ...string) []string { return append([]string{"--api-url", srv.URL}, args...) }
	offers := decode[[]map[string]any](t, e.ok(at("search", "num_gpus=1", "-o", "+dph_total", "--limit", "2", "--json")...).out)
	var ids []string
	for _, o := range offers {
		inst := decode[map[string]any](t, e.ok(at("rent", fmt.Sprint(int64(o["id"].(float64))), "--image", "ubuntu:22.04", "--json")...).out)
		ids = append(ids, fmt.Sprint(int64(inst["id"].(float64))))
	}
	slices.Sort(ids)
	// The first exec attaches the fleet key (the instances were created
	// without it) and records each host key.
	e.ok(at("exec", "--all", "--", "true")...)
	cfg := filepath.Join(t.TempDir(), "config")
	e.ok(at("export", "--format", "ssh-config", "--out", cfg)...)
	out, err := exec.Command("ssh", "-F", cfg, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "default-node-1", "echo $CONTAINER_ID").CombinedOutput()
	if err != nil {
		t.Fatalf("ssh vf-node-1 default-node-1 through the exported config: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), ids[1]) {
		t.Errorf("default-node-1 answered %q, want instance %s", out, ids[1])
	}
}

func TestSyncSendsOnlyChangedFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.launchFleet("s", 3)
	src := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(src, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("train.py", "print('v1')\n")
	write("pkg/util.py", "X = 1\n")
	write("model.pt", "weights")
	write("__pycache__/x.pyc", "cache")
	sync := func() []nodes.SyncRow {
		t.Helper()
		return decode[[]nodes.SyncRow](t, e.ok("sync", src, "--fleet", "s", "--json").out)
	}
	for _, r := range sync() {
		if r.FilesSent != 2 || r.Error != "" {
			t.Errorf("first sync %+v, want 2 files (weights and caches left out)", r)
		}
	}
	for _, r := range sync() {
		if r.FilesSent != 0 || r.FileBytes != 0 {
			t.Errorf("unchanged re-sync %+v, want nothing sent", r)
		}
	}
	write("train.py", "print('v2')\n")
	for _, r := range sync() {
		if r.FilesSent != 1 || r.FileBytes != int64(len("print('v2')\n")) {
			t.Errorf("re-sync after one change %+v, want 1 file", r)
		}
	}
	out := e.ok("exec", "--fleet", "s", "--", "cat project/train.py project/pkg/util.py; ls project").out
	if strings.Count(out, "print('v2')") != 3 || strings.Count(out, "X = 1") != 3 || strings.Contains(out, "model.pt") {
		t.Errorf("nodes hold:\n%s", out)
	}
}

func TestCollectOnlyChangedThenDestroy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.launchFleet("c", 2)
	e.ok("exec", "--fleet", "c", "--", `d=project/results; mkdir -p $d/logs && echo "loss $VASTFLEET_NODE_RANK" > $d/metrics.txt && echo run > $d/logs/run.log`)
	to := t.TempDir()
	collect := func() []nodes.CollectRow {
		t.Helper()
		return decode[[]nodes.CollectRow](t, e.ok("collect", "--fleet", "c", "--to", to, "--json").out)
	}
	for _, r := range collect() {
		if r.Files != 2 || r.Fetched != 2 || r.Error != "" {
			t.Errorf("first collect %+v, want 2 files fetched", r)
		}
	}
	if b, err := os.ReadFile(filepath.Join(to, "c", "c-node-1", "metrics.txt")); err != nil || string(b) != "loss 1\n" {
		t.Errorf("collected metrics.txt = %q, %v", b, err)
	}
	for _, r := range collect() {
		if r.Fetched != 0 {
			t.Errorf("unchanged re-collect %+v, want nothing fetched", r)
		}
	}
	e.ok("exec", "--fleet", "c", "--", "echo more >> project/results/logs/run.log")
	for _, r := range collect() {
		if r.Fetched != 1 || r.FileBytes != int64(len("run\nmore\n")) {
			t.Errorf("re-collect after one change %+v, want 1 file", r)
		}
	}
	// New results since the last collect: destroy refuses, naming them.
	e.ok("exec", "--fleet", "c", "--", "echo late > project/results/late.txt")
	r := e.fails("destroy", "--all", "--fleet", "c", "--yes")
	if !strings.Contains(r.err, "late.txt") || !strings.Contains(r.err, "nothing destroyed") {
		t.Fatalf("destroy with uncollected results: %s", r.err)
	}
	if n := len(decode[[]map[string]any](t, e.ok("ls", "--fleet", "c", "--json").out)); n != 2 {
		t.Fatalf("%d instances left after a refused destroy, want 2", n)
	}
	collect()
	e.ok("destroy", "--all", "--fleet", "c", "--yes")
	if b, err := os.ReadFile(filepath.Join(to, "c", "c-node-0", "logs", "run.log")); err != nil || string(b) != "run\nmore\n" {
		t.Errorf("after destroy the collected log is %q, %v", b, err)
	}
}

func TestDestroyForceSkipsTheResultsCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.launchFleet("d", 1)
	e.ok("exec", "--fleet", "d", "--", "mkdir -p project/results && echo x > project/results/x")
	e.fails("destroy", "--all", "--fleet", "d", "--yes")
	e.ok("destroy", "--all", "--fleet", "d", "--yes", "--force")
}

func TestDestroyCollectFirst(t *testing.T) {
	e := newEnv(t)
	e.launchFleet("k", 1)
	e.ok("exec", "--fleet", "k", "--", "mkdir -p project/results && echo final > project/results/final.txt")
	dir := t.TempDir()
	t.Chdir(dir)
	e.ok("destroy", "--all", "--fleet", "k", "--yes", "--collect")
	if b, err := os.ReadFile(filepath.Join(dir, "results", "k", "k-node-0", "final.txt")); err != nil || string(b) != "final\n" {
		t.Errorf("destroy --collect left %q, %v", b, err)
	}
}

// Eight nodes, one seed: this process sends the archive once and the
// nodes relay it to each other with their own ssh client; every node ends
// up with the tree, and no relay archive or key is left behind.
func TestSyncRelaysNodeToNode(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("OpenSSH client not installed (the nodes relay with it)")
	}
	e := newEnv(t)
	e.launchFleet("r", 8)
	src := t.TempDir()
	// Incompressible, so the bytes on the wire are the tree's size.
	blob := make([]byte, 1<<20)
	rand.Read(blob)
	os.WriteFile(filepath.Join(src, "weights.bin"), blob, 0o644)
	os.WriteFile(filepath.Join(src, "train.py"), []byte("print(1)\n"), 0o644)
	os.WriteFile(filepath.Join(src, ".vastfleetignore"), []byte("scratch/\n"), 0o644)
	os.MkdirAll(filepath.Join(src, "scratch"), 0o755)
	os.WriteFile(filepath.Join(src, "scratch", "tmp"), []byte("x"), 0o644)

	r := e.ok("sync", src, "--fleet", "r", "--relay-seeds", "1", "--json")
	rows := decode[[]nodes.SyncRow](t, r.out)
	relayed := 0
	for _, row := range rows {
		if row.Error != "" || row.FilesSent != 3 {
			t.Errorf("row %+v, want 3 files sent", row)
		}
		if row.Via != "" {
			relayed++
		}
	}
	if relayed != 7 {
		t.Errorf("%d nodes got the tree relayed, want 7 of 8\n%s", relayed, r.out)
	}
	t.Log(strings.TrimSpace(r.err))
	// One copy from here, plus SSH framing and the commands.
	m := regexp.MustCompile(`this machine sent ([0-9.]+) (KiB|MiB)`).FindStringSubmatch(r.err)
	if m == nil {
		t.Fatalf("no traffic line in %q", r.err)
	}
	if sent, _ := strconv.ParseFloat(m[1], 64); m[2] != "KiB" && sent > 1.5 {
		t.Errorf("this machine sent %s %s for 8 nodes of a 1 MiB tree; want about one copy", m[1], m[2])
	}
	out := e.ok("exec", "--fleet", "r", "--", "sha256sum project/weights.bin | cut -c1-16; ls -A project; ls -A").out
	sum := sha256.Sum256(blob)
	if n := strings.Count(out, hex.EncodeToString(sum[:8])); n != 8 {
		t.Errorf("%d nodes hold the right weights.bin, want 8:\n%s", n, out)
	}
	if strings.Contains(out, ".tgz") || strings.Contains(out, "scratch") || strings.Contains(out, "tmp.") {
		t.Errorf("relay leftovers or ignored files on the nodes:\n%s", out)
	}
	// Unchanged: nothing is sent.
	for _, row := range decode[[]nodes.SyncRow](t, e.ok("sync", src, "--fleet", "r", "--relay-seeds", "1", "--json").out) {
		if row.FilesSent != 0 || row.FileBytes != 0 || row.WireBytes != 0 {
			t.Errorf("unchanged re-sync %+v, want nothing sent", row)
		}
	}
}
