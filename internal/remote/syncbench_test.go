package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/sim/host"
)

// TestBenchSyncRelay measures what the laptop's uplink carries when a
// tree goes to a fleet: N simulated machines (internal/sim/host: real SSH
// servers on loopback running real shells), a tree of MB megabytes of
// incompressible files, synced with relaying on (3 seeds), then synced
// again unchanged. It reports the bytes this process sent on its sockets
// against N × the tree. Opt-in, and it needs N × MB of free disk:
//
//	VASTFLEET_BENCH_SYNC=300 VASTFLEET_BENCH_SYNC_MB=50 go test -run TestBenchSyncRelay -v -timeout 60m ./internal/remote
func TestBenchSyncRelay(t *testing.T) {
	t.Parallel()
	n, _ := strconv.Atoi(os.Getenv("VASTFLEET_BENCH_SYNC"))
	if n <= 0 {
		t.Skip("set VASTFLEET_BENCH_SYNC=300 (and VASTFLEET_BENCH_SYNC_MB=50) to run")
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("OpenSSH client not installed (the nodes relay with it)")
	}
	mb, _ := strconv.Atoi(os.Getenv("VASTFLEET_BENCH_SYNC_MB"))
	if mb <= 0 {
		mb = 50
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key, _ := ssh.NewSignerFromKey(priv)
	authorized := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.PublicKey())))

	mgr, err := host.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	targets := make([]Target, n)
	for i := range targets {
		ports, err := mgr.Boot(host.Spec{ID: int64(i + 1), Keys: []string{authorized}})
		if err != nil {
			t.Fatal(err)
		}
		targets[i] = Target{Name: fmt.Sprintf("node-%d", i), Host: "127.0.0.1", Port: ports[0], User: "root", Signer: key}
	}

	// The tree: MB one-megabyte files of random bytes, and some code.
	src := t.TempDir()
	blob := make([]byte, 1<<20)
	for i := range mb {
		rand.Read(blob)
		os.WriteFile(filepath.Join(src, fmt.Sprintf("shard-%03d.bin", i)), blob, 0o644)
	}
	for i := range 20 {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("mod%d.py", i)), []byte(strings.Repeat("x = 1\n", 100)), 0o644)
	}
	files, err := ScanTree(src, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tree int64
	for _, f := range files {
		tree += f.Size
	}

	p := NewPool(Options{})
	defer p.Close()
	probe := func() []SyncNode {
		t.Helper()
		outs := make([]strings.Builder, n)
		jobs := make([]Job, n)
		for i, tg := range targets {
			jobs[i] = Job{Target: tg, Cmd: SyncProbe("project"), Stdout: &outs[i]}
		}
		nodes := make([]SyncNode, n)
		for i, r := range p.RunAll(t.Context(), jobs, 64) {
			if !r.OK() {
				t.Fatalf("probe %s: %v", targets[i].Name, r.Err)
			}
			nodes[i] = SyncNode{Target: targets[i], State: ParseSyncProbe(outs[i].String())}
		}
		return nodes
	}
	run := func(label string) {
		t.Helper()
		nodes := probe()
		before, _ := p.Traffic()
		start := time.Now()
		res := Sync(t.Context(), p, src, files, nodes, SyncOptions{Dest: "project", Relay: true, Parallel: 64})
		wall := time.Since(start)
		after, _ := p.Traffic()
		var fileBytes int64
		relayed, failed := 0, 0
		for i, r := range res {
			fileBytes += r.FileBytes
			if r.Via != "" {
				relayed++
			}
			if r.Err != nil {
				failed++
				if failed <= 3 {
					t.Errorf("%s: %v", targets[i].Name, r.Err)
				}
			}
		}
		sent := after - before
		t.Logf("%s: %d nodes, tree %.1f MB (%d files): this process sent %.1f MB = %.2f × the tree = %.4f of %d × the tree; file bytes delivered to the nodes %d; %d relayed node to node; %d failed; %.1fs",
			label, n, float64(tree)/1e6, len(files), float64(sent)/1e6, float64(sent)/float64(tree),
			float64(sent)/float64(int64(n)*tree), n, fileBytes, relayed, failed, wall.Seconds())
	}
	run("first sync")
	// Every node holds the tree now.
	want := ManifestText(files)
	for _, nd := range probe() {
		if nd.State.Manifest != want {
			t.Fatalf("%s holds a different manifest after the sync", nd.Target.Name)
		}
	}
	run("second sync, unchanged")
}
