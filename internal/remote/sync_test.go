package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/sim/host"
)

// simFleet boots n simulated machines accepting one key; env[i] is added
// to machine i's session environment.
func simFleet(t *testing.T, n int, env func(i int, dir string) []string) (*host.Manager, []Target, []byte) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key, _ := ssh.NewSignerFromKey(priv)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := host.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	targets := make([]Target, n)
	for i := range targets {
		id := int64(i + 1)
		ports, err := mgr.Boot(host.Spec{ID: id, Keys: []string{string(ssh.MarshalAuthorizedKey(key.PublicKey()))},
			SessionEnv: env(i, mgr.Dir(id))})
		if err != nil {
			t.Fatal(err)
		}
		targets[i] = Target{Name: fmt.Sprintf("node-%d", i), Host: "127.0.0.1", Port: ports[0], User: "root", Signer: key}
	}
	return mgr, targets, pem.EncodeToMemory(block)
}

// The seed's ssh client is broken: its relay fails, the target is sent to
// directly, the broken node relays no more, and every node gets the
// tree. No relay key is left in any machine's temporary directory.
func TestSyncRelayFailureFallsBackToDirect(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("OpenSSH client not installed (the nodes relay with it)")
	}
	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, "ssh"), []byte("#!/bin/sh\necho 'ssh: connect: no route' >&2\nexit 255\n"), 0o755)
	mgr, targets, keyPEM := simFleet(t, 5, func(i int, dir string) []string {
		tmp := filepath.Join(dir, "tmp")
		os.MkdirAll(tmp, 0o700)
		env := []string{"TMPDIR=" + tmp}
		if i == 0 {
			env = append(env, "PATH="+broken+":"+os.Getenv("PATH"))
		}
		return env
	})
	src := t.TempDir()
	writeTree(t, src, map[string]string{"train.py": "print(1)\n", "lib/a.py": "A = 1\n"})
	files, err := ScanTree(src, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPool(Options{})
	defer p.Close()
	nodes := make([]SyncNode, len(targets))
	for i, tg := range targets {
		c, err := p.Connect(t.Context(), tg)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if code, err := c.Run(t.Context(), SyncProbe("project"), nil, &out, nil); err != nil || code != 0 {
			t.Fatalf("probe: %d %v", code, err)
		}
		nodes[i] = SyncNode{Target: tg, State: ParseSyncProbe(out.String())}
		if !nodes[i].State.CanRelay {
			t.Fatalf("%s reports it cannot relay", tg.Name)
		}
	}
	res := Sync(t.Context(), p, src, files, nodes, SyncOptions{Dest: "project", Seeds: 1, RelayKey: keyPEM})
	relayed := 0
	for i, r := range res {
		if r.Err != nil || r.Files != 2 {
			t.Errorf("%s: %+v", targets[i].Name, r)
		}
		if r.Via == "node-0" {
			t.Errorf("%s relayed by the broken node-0", targets[i].Name)
		}
		if r.Via != "" {
			relayed++
		}
	}
	// node-0 (the seed) and node-0's failed target come from here; the
	// other three are relayed.
	if relayed != 3 {
		t.Errorf("%d relayed, want 3: %+v", relayed, res)
	}
	for i := range targets {
		dir := mgr.Dir(int64(i + 1))
		if b, err := os.ReadFile(filepath.Join(dir, "project", "lib", "a.py")); err != nil || string(b) != "A = 1\n" {
			t.Errorf("%s holds lib/a.py = %q, %v", targets[i].Name, b, err)
		}
		left, _ := os.ReadDir(filepath.Join(dir, "tmp"))
		kept, _ := filepath.Glob(filepath.Join(dir, "project", SyncManifest+"-*"))
		if len(left) != 0 || len(kept) != 0 {
			t.Errorf("%s keeps %v in its tmp and %v in project", targets[i].Name, left, kept)
		}
	}
}
