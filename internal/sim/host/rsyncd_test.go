package host

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// TestRsyncDaemonOverSSH runs rsync as `vastai copy` does, in daemon mode
// over OpenSSH as vastai_kaalia with the instance id as the module: files
// go up and come back under /workspace and /root (both the instance
// directory), and no path leads out of it.
func TestRsyncDaemonOverSSH(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"ssh", "rsync"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	root := t.TempDir()
	m, err := New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := gossh.MarshalPrivateKey(priv, "")
	keyFile := filepath.Join(t.TempDir(), "id")
	os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600)
	sp, _ := gossh.NewPublicKey(pub)
	ports, err := m.Boot(Spec{ID: 33, Keys: []string{strings.TrimSpace(string(gossh.MarshalAuthorizedKey(sp)))}, Onstart: "true"})
	if err != nil {
		t.Fatal(err)
	}
	dir := m.Dir(33)
	waitFileExists(t, filepath.Join(dir, "hasbooted"))
	sshCmd := "ssh -i " + keyFile + " -p " + strconv.Itoa(ports[0]) +
		" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
	rsync := func(src, dst string) (string, error) {
		out, err := exec.Command("rsync", "-arz", "-e", sshCmd, src, dst).CombinedOutput()
		return string(out), err
	}
	remote := func(id, path string) string { return CopyUser + "@127.0.0.1::" + id + "/" + path }

	local := t.TempDir()
	os.MkdirAll(filepath.Join(local, "data", "sub"), 0o755)
	os.WriteFile(filepath.Join(local, "data", "sub", "w.bin"), []byte("weights"), 0o644)

	// Up, as `vastai copy data 33:/workspace/`.
	if out, err := rsync(filepath.Join(local, "data"), remote("33", "/workspace/")); err != nil {
		t.Fatalf("upload: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "data", "sub", "w.bin")); string(b) != "weights" {
		t.Fatalf("upload landed as %q, %v", b, err)
	}
	// Down, as `vastai copy C.33:/root/data back`, with the C. form.
	back := filepath.Join(t.TempDir(), "back")
	if out, err := rsync(remote("C.33", "/root/data"), back); err != nil {
		t.Fatalf("download: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(back, "data", "sub", "w.bin")); string(b) != "weights" {
		t.Fatalf("download came back as %q, %v", b, err)
	}

	// Out of the instance: up through "..", to another absolute path, and
	// down from the machine's area (its log, the daemon's configuration).
	secret := filepath.Join(root, "33", "container.log")
	os.WriteFile(secret, []byte("machine only"), 0o600)
	for _, dst := range []string{"/workspace/../../escaped/", "../../escaped/", "/etc/escaped/", "/escaped/"} {
		rsync(filepath.Join(local, "data"), remote("33", dst))
	}
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error {
		if strings.Contains(p, "escaped") {
			t.Errorf("an upload left the instance directory: %s", p)
		}
		return nil
	})
	for _, src := range []string{"/container.log", "/root/../container.log", "/rsyncd.conf", "/"} {
		got := t.TempDir()
		rsync(remote("33", src), got)
		filepath.Walk(got, func(p string, _ os.FileInfo, _ error) error {
			if b := filepath.Base(p); b == "container.log" || b == "rsyncd.conf" {
				t.Errorf("download of %s brought %s from outside the instance directory", src, p)
			}
			return nil
		})
	}
	// Through a symlink the instance made to the machine's files, down
	// and up: rsync 3.2 resolves daemon paths beneath the module (EXDEV).
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("machine only"), 0o600)
	os.Symlink(outside, filepath.Join(dir, "evil"))
	got := t.TempDir()
	rsync(remote("33", "/root/evil/secret"), got)
	rsync(remote("33", "/root/evil/"), got)
	filepath.Walk(got, func(p string, _ os.FileInfo, _ error) error {
		if filepath.Base(p) == "secret" {
			t.Errorf("a symlink in the instance led a download out: %s", p)
		}
		return nil
	})
	rsync(filepath.Join(local, "data"), remote("33", "/root/evil/"))
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("a symlink in the instance led an upload out: %v", entries)
	}

	// Another instance's module is not served by this machine.
	if out, err := rsync(filepath.Join(local, "data"), remote("34", "/workspace/")); err == nil {
		t.Errorf("module 34 accepted on instance 33's machine: %s", out)
	}
	// A key the instance does not accept gets nowhere.
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	ob, _ := gossh.MarshalPrivateKey(other, "")
	otherFile := filepath.Join(t.TempDir(), "other")
	os.WriteFile(otherFile, pem.EncodeToMemory(ob), 0o600)
	out, err := exec.Command("rsync", "-arz", "-e", strings.Replace(sshCmd, keyFile, otherFile, 1), filepath.Join(local, "data"), remote("33", "/workspace/other/")).CombinedOutput()
	if err == nil {
		t.Errorf("a stranger's key copied: %s", out)
	}
}
