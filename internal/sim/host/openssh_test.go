package host

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// TestOpenSSHSurface: what users do with OpenSSH on a vast instance works
// the same on a simulated one: scp exits 0 when the file arrives, ssh -L
// (here -W, the same direct-tcpip channel) reaches a server on the
// container's loopback and nothing else, commands run under bash, and
// what an SSH command prints stays out of the container log.
func TestOpenSSHSurface(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"ssh", "scp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs OpenSSH's %s", tool)
		}
	}
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, _ := gossh.NewPublicKey(pub)
	ports, err := m.Boot(Spec{ID: 31, Keys: []string{strings.TrimSpace(string(gossh.MarshalAuthorizedKey(sp)))}, Onstart: "echo onstart-ran"})
	if err != nil {
		t.Fatal(err)
	}
	dir := m.Dir(31)
	waitFileExists(t, filepath.Join(dir, "hasbooted"))
	port := strconv.Itoa(ports[0])
	opts := []string{"-i", keyFile, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"}
	ssh := func(args ...string) *exec.Cmd {
		return exec.Command("ssh", append(append(append([]string{}, opts...), "-p", port), args...)...)
	}

	// scp: the file arrives and the exit status says so.
	src := filepath.Join(t.TempDir(), "weights.bin")
	os.WriteFile(src, []byte("not really weights"), 0o644)
	scp := exec.Command("scp", append(append(append([]string{}, opts...), "-P", port), src, "root@127.0.0.1:weights.bin")...)
	if out, err := scp.CombinedOutput(); err != nil {
		t.Errorf("scp upload: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "weights.bin")); err != nil || string(b) != "not really weights" {
		t.Errorf("scp upload arrived as %q, %v", b, err)
	}

	// bash is the shell, as in vast's images.
	if _, err := exec.LookPath("bash"); err == nil {
		out, err := ssh("root@127.0.0.1", `echo "bash=${BASH_VERSION:+yes}"; echo ssh-output-marker`).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "bash=yes") {
			t.Errorf("shell: %q, %v", out, err)
		}
	}

	// A server on the container's loopback (Jupyter, TensorBoard) is
	// reachable through the SSH connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	fwd := ssh("-W", ln.Addr().String(), "root@127.0.0.1")
	fwd.Stdin = strings.NewReader("through the tunnel\n")
	if out, err := fwd.Output(); string(out) != "through the tunnel\n" {
		t.Errorf("ssh -W to the container's loopback: %q, %v", out, err)
	}
	// Anything off this machine is refused, as nothing simulated may
	// point there.
	if out, err := ssh("-W", "192.0.2.1:80", "root@127.0.0.1").CombinedOutput(); err == nil {
		t.Errorf("a forward off the machine was allowed: %q", out)
	}

	log, _ := os.ReadFile(m.LogPath(31))
	if !strings.Contains(string(log), "onstart-ran") {
		t.Errorf("container log lost the onstart's output:\n%s", log)
	}
	if strings.Contains(string(log), "ssh-output-marker") {
		t.Errorf("an SSH command's output landed in the container log:\n%s", log)
	}
}
