package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/sim/host"
)

// TestBenchSyncRelay measures a tree going to a fleet: N simulated
// machines (internal/sim/host: real SSH servers on loopback running real
// shells), each with a downlink and an uplink that pace its SSH traffic
// (drawn log-uniform from 200 Mb/s, launch's default inet_down floor, to
// 10 Gb/s, the uplink 30-110% of it, as the simulator's offers), a tree of
// MB megabytes of incompressible files, synced with relaying on (3 seeds,
// the fastest uplinks first), then synced again unchanged. It reports the
// bytes this process sent on its sockets against N × the tree, and when
// the last node held the tree against the least its link allows. It runs
// reduced in go test (6 nodes, 2 MB); the size needs N × MB × 2 of
// free disk:
//
//	VASTFLEET_BENCH_SYNC=300 VASTFLEET_BENCH_SYNC_MB=50 go test -run TestBenchSyncRelay -v -timeout 60m ./internal/remote
func TestBenchSyncRelay(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("OpenSSH client not installed (the nodes relay with it)")
	}
	n, _ := strconv.Atoi(os.Getenv("VASTFLEET_BENCH_SYNC"))
	mb, _ := strconv.Atoi(os.Getenv("VASTFLEET_BENCH_SYNC_MB"))
	if n <= 0 {
		n, mb = 6, 2
	}
	if mb <= 0 {
		mb = 50
	}
	links := mrand.New(mrand.NewPCG(1, uint64(n)))
	downs, ups := make([]float64, n), make([]float64, n)
	for i := range n {
		downs[i] = 200 * math.Pow(10000/200.0, links.Float64())
		ups[i] = downs[i] * (0.3 + 0.8*links.Float64())
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
		ports, err := mgr.Boot(host.Spec{ID: int64(i + 1), Keys: []string{authorized}, Link: host.Link{DownMbps: downs[i], UpMbps: ups[i]}})
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
			nodes[i] = SyncNode{Target: targets[i], State: ParseSyncProbe(outs[i].String()), UpMbps: ups[i]}
		}
		return nodes
	}
	run := func(label string) (sent int64) {
		t.Helper()
		nodes := probe()
		before, _ := p.Traffic()
		start := time.Now()
		res := Sync(t.Context(), p, src, files, nodes, SyncOptions{Dest: "project", Relay: true, Parallel: 64})
		wall := time.Since(start)
		after, _ := p.Traffic()
		var fileBytes int64
		var last, bound time.Duration
		relayed, failed := 0, 0
		for i, r := range res {
			fileBytes += r.FileBytes
			if r.Via != "" {
				relayed++
			}
			if r.Err == nil && r.Took > 0 {
				last = max(last, r.Took)
				bound = max(bound, time.Duration(float64(r.WireBytes)*8/(downs[i]*1e6)*float64(time.Second)))
			}
			if r.Err != nil {
				failed++
				if failed <= 3 {
					t.Errorf("%s: %v", targets[i].Name, r.Err)
				}
			}
		}
		sent = after - before
		t.Logf("%s: %d nodes, tree %.1f MB (%d files): this process sent %.1f MB = %.2f × the tree = %.4f of %d × the tree; file bytes delivered to the nodes %d; %d relayed node to node; %d failed; %.1fs",
			label, n, float64(tree)/1e6, len(files), float64(sent)/1e6, float64(sent)/float64(tree),
			float64(sent)/float64(int64(n)*tree), n, fileBytes, relayed, failed, wall.Seconds())
		if bound > 0 {
			t.Logf("%s: the last node held the tree after %.2fs, %.2f× the %.2fs its archive takes over the slowest downlink (%.0f Mb/s)",
				label, last.Seconds(), last.Seconds()/bound.Seconds(), bound.Seconds(), slices.Min(downs))
		}
		return sent
	}
	if sent := run("first sync"); float64(sent) > 3.2*float64(tree) {
		t.Errorf("this process sent %.2f× the tree with 3 seeds relaying", float64(sent)/float64(tree))
	}
	// Every node holds the tree now.
	want := ManifestText(files)
	for _, nd := range probe() {
		if nd.State.Manifest != want {
			t.Fatalf("%s holds a different manifest after the sync", nd.Target.Name)
		}
	}
	run("second sync, unchanged")
}
