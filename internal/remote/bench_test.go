package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// TestBenchExecFanout measures `exec -- true` on N loopback SSH nodes:
// this package's pool against the system ssh client run 32 at a time (what
// pdsh does), side by side in one run. Opt-in:
//
//	VASTFLEET_BENCH_EXEC=300 go test -run TestBenchExecFanout -v ./internal/remote
func TestBenchExecFanout(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("VASTFLEET_BENCH_EXEC"))
	if n <= 0 {
		t.Skip("set VASTFLEET_BENCH_EXEC=300 to run")
	}
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("OpenSSH client not installed")
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key, _ := ssh.NewSignerFromKey(priv)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "id")
	os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600)
	servers := make([]*testServer, n)
	for i := range servers {
		servers[i] = startServer(t, listen(t), key.PublicKey())
	}

	start := time.Now()
	p := NewPool(Options{})
	jobs := make([]Job, n)
	for i, s := range servers {
		jobs[i] = Job{Target: target(s, key, fmt.Sprint(i)), Cmd: "true"}
	}
	failed := 0
	for _, r := range p.RunAll(t.Context(), jobs, 0) {
		if !r.OK() {
			failed++
		}
	}
	pool := time.Since(start)
	// Again on the open connections: what a second command on the fleet costs.
	start = time.Now()
	for _, r := range p.RunAll(t.Context(), jobs, 0) {
		if !r.OK() {
			failed++
		}
	}
	reused := time.Since(start)
	p.Close()

	start = time.Now()
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	sshFailed := 0
	for _, s := range servers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := exec.Command(sshBin, "-i", keyFile, "-p", strconv.Itoa(s.addr.Port), "-o", "BatchMode=yes",
				"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
				"root@127.0.0.1", "true").Run()
			if err != nil {
				mu.Lock()
				sshFailed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	openssh := time.Since(start)
	t.Logf("exec -- true on %d loopback SSH nodes (%d CPUs):", n, runtimeCPUs())
	t.Logf("  vastfleet pool, first run (connect+run): %8.2fs  failed %d", pool.Seconds(), failed)
	t.Logf("  vastfleet pool, again on open conns:     %8.2fs", reused.Seconds())
	t.Logf("  system ssh, 32 in parallel:              %8.2fs  failed %d", openssh.Seconds(), sshFailed)
	t.Logf("  ratio ssh/vastfleet (first run): %.1fx", openssh.Seconds()/pool.Seconds())
	if failed > 0 || sshFailed > 0 {
		t.Errorf("failures: vastfleet %d, ssh %d", failed, sshFailed)
	}
}

func runtimeCPUs() int { return runtime.NumCPU() }
