package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
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
	t.Parallel()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("OpenSSH client not installed (the nodes relay with it)")
	}
	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, "ssh"), []byte("#!/bin/sh\necho 'ssh: connect: no route' >&2\nexit 255\n"), 0o755)
	mgr, targets, _ := simFleet(t, 5, func(i int, dir string) []string {
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
	res := Sync(t.Context(), p, src, files, nodes, SyncOptions{Dest: "project", Seeds: 1, Relay: true})
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

// Every node relays through an ssh that keeps a copy of each key it is
// handed, as a hostile host would. After the sync, no file on any node
// holds the fleet's key, and no key a node kept opens any node.
func TestSyncRelayLeavesNoKeyThatOpensANode(t *testing.T) {
	t.Parallel()
	real, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("OpenSSH client not installed (the nodes relay with it)")
	}
	thief := t.TempDir()
	os.WriteFile(filepath.Join(thief, "ssh"), []byte("#!/bin/sh\nprev=\nn=0\nfor a in \"$@\"; do\n"+
		"  if [ \"$prev\" = -i ]; then n=$((n+1)); cp \"$a\" \"$HOME/stolen-$$-$n\"; fi\n  prev=$a\ndone\nexec "+real+" \"$@\"\n"), 0o755)
	mgr, targets, fleetKey := simFleet(t, 6, func(i int, dir string) []string {
		return []string{"PATH=" + thief + ":" + os.Getenv("PATH")}
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
		nodes[i] = SyncNode{Target: tg, State: NodeState{CanRelay: true}}
	}
	relayed := 0
	for i, r := range Sync(t.Context(), p, src, files, nodes, SyncOptions{Dest: "project", Seeds: 1, Relay: true}) {
		if r.Err != nil || r.Files != 2 {
			t.Errorf("%s: %+v", targets[i].Name, r)
		}
		if r.Via != "" {
			relayed++
		}
	}
	if relayed == 0 {
		t.Fatal("nothing was relayed; the test proves nothing")
	}

	var stolen []ssh.Signer
	for i := range targets {
		dir := mgr.Dir(int64(i + 1))
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			b, _ := os.ReadFile(p)
			if strings.Contains(string(b), strings.TrimSpace(string(fleetKey))) {
				t.Errorf("%s holds the fleet's private key", p)
			}
			if strings.Contains(string(b), relayTag) {
				t.Errorf("%s still lists a relay key:\n%s", p, b)
			}
			if k, err := ssh.ParsePrivateKey(b); err == nil {
				stolen = append(stolen, k)
			}
			return nil
		})
	}
	if len(stolen) != relayed {
		t.Fatalf("the nodes kept %d keys, want one per relayed push (%d)", len(stolen), relayed)
	}
	probe := NewPool(Options{AuthRetries: -1, RefusedRetries: -1})
	defer probe.Close()
	for k, key := range stolen {
		for _, tg := range targets {
			tg.Signer = key
			if _, err := probe.Connect(t.Context(), tg); !errors.Is(err, ErrAuth) {
				t.Errorf("kept key %d against %s: %v, want %v", k, tg.Name, err, ErrAuth)
			}
		}
	}
}

// A relay key, while installed, runs only the receive of its own archive:
// any other command the holder asks for is not run, an archive with
// another hash is refused, and removing it closes the node again.
func TestRelayKeyOnlyReceivesItsArchive(t *testing.T) {
	t.Parallel()
	mgr, targets, _ := simFleet(t, 1, func(int, string) []string { return nil })
	p := NewPool(Options{AuthRetries: -1, RefusedRetries: -1})
	defer p.Close()
	tc, err := p.Connect(t.Context(), targets[0])
	if err != nil {
		t.Fatal(err)
	}
	d := &distribution{opts: SyncOptions{Dest: "project"}, name: SyncManifest + "-x.tgz", sum: strings.Repeat("ab", 32), tag: relayTag + "test-"}
	priv, line, tag, err := d.edgeKey(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if code, err := tc.Run(t.Context(), installKeyCmd(line), nil, &out, &out); err != nil || code != 0 {
		t.Fatalf("install: %d %v %s", code, err, out.String())
	}
	key, err := ssh.ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	holder := targets[0]
	holder.Signer = key
	hp := NewPool(Options{AuthRetries: -1, RefusedRetries: -1}) // a pool reuses one connection per address
	defer hp.Close()
	hc, err := hp.Connect(t.Context(), holder)
	if err != nil {
		t.Fatalf("the installed relay key does not open its target: %v", err)
	}
	out.Reset()
	code, err := hc.Run(t.Context(), "touch pwned; cat .ssh/authorized_keys", strings.NewReader("not the archive"), &out, &out)
	if err != nil || code == 0 {
		t.Errorf("a command under the relay key: exit %d %v, want the receive's refusal", code, err)
	}
	dir := mgr.Dir(1)
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("the relay key ran a command of the holder's choosing")
	}
	if strings.Contains(out.String(), "ssh-ed25519") || !strings.Contains(out.String(), "not the one sent") {
		t.Errorf("output %q: want the receive's refusal only", out.String())
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "project", SyncManifest+"*")); len(m) != 0 {
		t.Errorf("a refused archive left %v", m)
	}
	if code, err := tc.Run(t.Context(), removeKeysCmd(tag), nil, io.Discard, io.Discard); err != nil || code != 0 {
		t.Fatalf("remove: %d %v", code, err)
	}
	p2 := NewPool(Options{AuthRetries: -1, RefusedRetries: -1})
	defer p2.Close()
	if _, err := p2.Connect(t.Context(), holder); !errors.Is(err, ErrAuth) {
		t.Errorf("the removed relay key: %v, want %v", err, ErrAuth)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".ssh", "authorized_keys")); !strings.Contains(string(b), "ssh-ed25519") {
		t.Errorf("removing the relay key took the fleet's key with it:\n%s", b)
	}
}

// TestSyncRelaysFromTheFastestUplinks: with one seed, this process sends
// to the node with the fastest listed uplink, the tree grows from the
// fast senders, and the slowest sender, served last, relays to nobody.
// Every node says when it held the tree.
func TestSyncRelaysFromTheFastestUplinks(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("OpenSSH client not installed (the nodes relay with it)")
	}
	ups := []float64{10, 1000, 50, 500, 20, 200}
	_, targets, _ := simFleet(t, len(ups), func(i int, dir string) []string {
		tmp := filepath.Join(dir, "tmp")
		os.MkdirAll(tmp, 0o700)
		return []string{"TMPDIR=" + tmp}
	})
	src := t.TempDir()
	writeTree(t, src, map[string]string{"train.py": "print(1)\n"})
	files, err := ScanTree(src, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPool(Options{})
	defer p.Close()
	nodes := make([]SyncNode, len(targets))
	for i, tg := range targets {
		nodes[i] = SyncNode{Target: tg, State: NodeState{CanRelay: true}, UpMbps: ups[i]}
	}
	res := Sync(t.Context(), p, src, files, nodes, SyncOptions{Dest: "project", Seeds: 1, Relay: true})
	relays := map[string]int{}
	for i, r := range res {
		if r.Err != nil || r.Files != 1 || r.Took <= 0 {
			t.Fatalf("%s: %+v", targets[i].Name, r)
		}
		relays[r.Via]++
	}
	if res[1].Via != "" || relays[""] != 1 {
		t.Errorf("this process sent to %d nodes, node-1 (1000 Mb/s up) via %q: want node-1 alone", relays[""], res[1].Via)
	}
	if relays["node-0"] != 0 {
		t.Errorf("node-0, the slowest sender (10 Mb/s up), relayed to %d nodes", relays["node-0"])
	}
	if relays["node-1"] < 2 {
		t.Errorf("node-1, the fastest sender, relayed to %d nodes: %v", relays["node-1"], relays)
	}
}
