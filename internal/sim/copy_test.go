package sim

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

	gossh "golang.org/x/crypto/ssh"
)

// copyKey writes a private key file and returns it with its public line.
func copyKey(t *testing.T) (string, string) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := gossh.MarshalPrivateKey(priv, "")
	file := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, _ := gossh.NewPublicKey(pub)
	return file, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(sp)))
}

// TestVastCLICopy does what `vastai copy` does (vast.py copy()): asks
// PUT /commands/rsync/ for the daemon's address, then runs the CLI's own
// rsync command line against it, both ways; copies between two instances
// with PUT /commands/copy_direct/; and checks that no path, and no symlink
// an instance made, leads a copy out of an instance's directory.
func TestVastCLICopy(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"ssh", "rsync"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	h := newHarness(t, Config{Seed: 23, HostDir: t.TempDir()})
	defer h.m.Close()
	a, b := cliInstanceAt(t, h, 0), cliInstanceAt(t, h, 1)
	keyFile, pub := copyKey(t)
	for _, id := range []int64{a, b} {
		if st, _, body := h.do("POST", fmt.Sprintf("/api/v0/instances/%d/ssh/", id), map[string]string{"ssh_key": pub}, nil); st != 200 {
			t.Fatalf("attach: %d %s", st, body)
		}
	}
	dirA, dirB := h.m.HostDir(a), h.m.HostDir(b)

	type answer struct {
		Success bool   `json:"success"`
		Msg     string `json:"msg"`
		DstAddr string `json:"dst_addr"`
		DstPort int    `json:"dst_port"`
		SrcAddr string `json:"src_addr"`
		SrcPort int    `json:"src_port"`
	}
	ask := func(route string, src, dst any, srcPath, dstPath string) (int, answer) {
		t.Helper()
		var ans answer
		st, _, _ := h.do("PUT", "/api/v0/commands/"+route+"/", map[string]any{"client_id": "me",
			"src_id": src, "dst_id": dst, "src_path": srcPath, "dst_path": dstPath}, &ans)
		return st, ans
	}
	// The CLI's command line, with the known-hosts file kept out of HOME.
	rsync := func(port int, src, dst string) {
		t.Helper()
		cmd := fmt.Sprintf("rsync -arz -v --progress --rsh=ssh -e 'ssh -i %s -p %d -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes' %s %s", keyFile, port, src, dst)
		if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
	}

	// Up: vastai copy LOCAL/data ID:/workspace/
	local := t.TempDir()
	os.MkdirAll(filepath.Join(local, "data", "sub"), 0o755)
	os.WriteFile(filepath.Join(local, "data", "sub", "w.bin"), []byte("weights"), 0o644)
	st, ans := ask("rsync", nil, fmt.Sprint(a), filepath.Join(local, "data"), "/workspace/")
	if st != 200 || !ans.Success || ans.DstAddr != "127.0.0.1" || ans.DstPort == 0 {
		t.Fatalf("rsync upload answer: %d %+v", st, ans)
	}
	rsync(ans.DstPort, filepath.Join(local, "data"), fmt.Sprintf("vastai_kaalia@%s::%d//workspace/", ans.DstAddr, a))
	if got, err := os.ReadFile(filepath.Join(dirA, "data", "sub", "w.bin")); string(got) != "weights" {
		t.Fatalf("upload landed as %q, %v", got, err)
	}
	// Down: vastai copy C.ID:/root/data LOCALDIR
	back := filepath.Join(t.TempDir(), "back")
	st, ans = ask("rsync", "C."+fmt.Sprint(a), nil, "/root/data", back)
	if st != 200 || !ans.Success || ans.SrcAddr != "127.0.0.1" || ans.SrcPort == 0 {
		t.Fatalf("rsync download answer: %d %+v", st, ans)
	}
	rsync(ans.SrcPort, fmt.Sprintf("vastai_kaalia@%s::C.%d//root/data", ans.SrcAddr, a), back)
	if got, err := os.ReadFile(filepath.Join(back, "data", "sub", "w.bin")); string(got) != "weights" {
		t.Fatalf("download came back as %q, %v", got, err)
	}

	// Instance to instance: A:/workspace/data -> B:/workspace/
	if st, ans = ask("copy_direct", fmt.Sprint(a), fmt.Sprint(b), "/workspace/data", "/workspace/"); st != 200 || !ans.Success {
		t.Fatalf("copy_direct: %d %+v", st, ans)
	}
	if got, err := os.ReadFile(filepath.Join(dirB, "data", "sub", "w.bin")); string(got) != "weights" {
		t.Fatalf("direct copy landed as %q, %v", got, err)
	}
	// A trailing slash copies the contents, as rsync does.
	if st, ans = ask("copy_direct", fmt.Sprint(a), fmt.Sprint(b), "/workspace/data/", "/root/flat"); st != 200 || !ans.Success {
		t.Fatalf("copy_direct of contents: %d %+v", st, ans)
	}
	if _, err := os.Stat(filepath.Join(dirB, "flat", "sub", "w.bin")); err != nil {
		t.Fatalf("contents copy: %v", err)
	}

	// Out of the instance: by path, and through symlinks the instances
	// made, to a directory of the simulator's machine.
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("machine only"), 0o600)
	os.Symlink(outside, filepath.Join(dirA, "evil"))
	os.Symlink(outside, filepath.Join(dirB, "trap"))
	for _, c := range [][2]string{
		{"/workspace/../../", "/workspace/"},
		{"/etc/passwd", "/workspace/"},
		{"/workspace/data", "/workspace/../../escaped"},
		{"/workspace/data", "/tmp/escaped"},
		{"/workspace/evil/", "/workspace/stolen"},
		{"/workspace/evil/secret", "/workspace/"},
		{"/workspace/data", "/workspace/trap/"},
		{"/workspace/data/sub/w.bin", "/workspace/trap/planted"},
	} {
		if st, ans = ask("copy_direct", fmt.Sprint(a), fmt.Sprint(b), c[0], c[1]); st == 200 && ans.Success {
			t.Errorf("copy_direct %s -> %s succeeded: %+v", c[0], c[1], ans)
		}
	}
	if _, err := os.Stat(filepath.Join(dirB, "stolen", "secret")); err == nil {
		t.Error("a symlink led the copy to the machine's files")
	}
	if _, err := os.Stat(filepath.Join(dirB, "secret")); err == nil {
		t.Error("a symlink led the copy to the machine's files")
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("a copy wrote outside the instance: %v", entries)
	}

	// cancel copy ID: nothing runs, but the instance must be the account's.
	var cancel answer
	if st, _, body := h.do("DELETE", "/api/v0/commands/copy_direct/", map[string]any{"client_id": "me", "dst_id": fmt.Sprint(b)}, &cancel); st != 200 || !cancel.Success {
		t.Errorf("cancel copy: %d %s", st, body)
	}
	if st, _, _ := h.do("DELETE", "/api/v0/commands/copy_direct/", map[string]any{"client_id": "me", "dst_id": "999999999"}, nil); st != 404 {
		t.Errorf("cancel copy of no instance: %d", st)
	}
	// A stopped instance's daemon is unreachable, and the answer says so.
	h.setState(b, "stopped")
	if st, ans = ask("rsync", nil, fmt.Sprint(b), local, "/workspace/"); st != 200 || ans.Success || ans.Msg == "" {
		t.Errorf("rsync to a stopped instance: %d %+v", st, ans)
	}
}
