package cli

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// runWithEnv runs one command with the given environment only.
func runWithEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	ios := &iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errb, Getenv: func(k string) string { return env[k] }}
	code := Main(context.Background(), ios, args)
	return result{out: out.String(), err: errb.String(), code: code}
}

func TestAPIKeyHandling(t *testing.T) {
	t.Parallel()
	const key = "real-looking-key-0123456789"
	mkt, err := sim.New(sim.Config{Seed: 1, APIKey: key, Offers: 10})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mkt.Handler())
	defer srv.Close()
	home := t.TempDir()
	env := map[string]string{"VASTFLEET_HOME": filepath.Join(home, "data"), "HOME": home}

	// The flag works, with a warning.
	r := runWithEnv(t, env, "--market", "vast", "--api-url", srv.URL, "--api-key", key, "balance")
	if r.code != 0 || !strings.Contains(r.err, "process list") {
		t.Fatalf("--api-key: exit %d, stderr %q; want success with a process-list warning", r.code, r.err)
	}
	// From the environment: no warning.
	env["VAST_API_KEY"] = key
	if r := runWithEnv(t, env, "--market", "vast", "--api-url", srv.URL, "balance"); r.code != 0 || strings.Contains(r.err, "warning") {
		t.Fatalf("VAST_API_KEY: exit %d, stderr %q; want success, no warning", r.code, r.err)
	}
	delete(env, "VAST_API_KEY")
	// From a key file others can read: used, with a warning.
	keyFile := filepath.Join(home, ".config", "vastai", "vast_api_key")
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runWithEnv(t, env, "--market", "vast", "--api-url", srv.URL, "balance"); r.code != 0 || !strings.Contains(r.err, "chmod 600") {
		t.Fatalf("readable key file: exit %d, stderr %q; want success with a chmod warning", r.code, r.err)
	}
	// Plain http to another machine is refused before anything is sent.
	r = runWithEnv(t, env, "--market", "vast", "--api-url", "http://192.0.2.1:8765", "balance")
	if r.code == 0 || !strings.Contains(r.err, "https://") {
		t.Fatalf("plain http off this machine: exit %d, stderr %q; want a refusal asking for https", r.code, r.err)
	}
}

func TestAPIURLCredentialsAreNotEchoed(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-in-the-url"
	home := t.TempDir()
	env := map[string]string{"VASTFLEET_HOME": home, "HOME": home, "VAST_API_KEY": "k"}
	for _, args := range [][]string{
		{"--market", "sim", "--api-url", "http://127.0.0.1:1/?api_key=" + secret, "ls"},
		{"--market", "sim", "--api-url", "http://u:" + secret + "@127.0.0.1:1/", "ls"},
		{"--market", "vast", "--api-url", "https://console.vast.ai/?api_key=" + secret, "balance"},
		{"--market", "vast", "--api-url", "https://" + secret + "@console.vast.ai/", "balance"},
		{"--market", "vast", "--api-url", "https://console.vast.ai/%zz?api_key=" + secret, "balance"},
	} {
		r := runWithEnv(t, env, args...)
		if r.code == 0 {
			t.Errorf("%v succeeded", args)
		}
		if strings.Contains(r.err+r.out, secret) {
			t.Errorf("%v echoes the credential:\n%s", args, r.err)
		}
	}
}

// TestServeAPIKeyFromSecretFile: `serve --api-key-file` refuses a key file
// others may read; from a 0600 one the server and the commands it runs
// for clients use the key (the market accepts nothing else here), no
// answer to a client holds it, and no file of the data dir (serve.db,
// state.db and their WALs included) holds its bytes.
func TestServeAPIKeyFromSecretFile(t *testing.T) {
	t.Parallel()
	const key = "vk-secret-file-0123456789abcdef"
	mkt, err := sim.New(sim.Config{Seed: 1, APIKey: key, Offers: 10})
	if err != nil {
		t.Fatal(err)
	}
	market := httptest.NewServer(mkt.Handler())
	defer market.Close()
	e := newEnv(t)
	keyFile := filepath.Join(t.TempDir(), "vast_api_key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(keyFile, 0o640)
	serve := []string{"--market", "vast", "--api-url", market.URL, "serve", "--addr", "127.0.0.1:0", "--api-key-file", keyFile}
	if r := e.fails(serve...); r.code != 2 || !strings.Contains(r.err, "chmod 600") {
		t.Fatalf("a key file others may read: exit %d %s", r.code, r.err)
	}
	os.Chmod(keyFile, 0o600)
	tok := strings.TrimSpace(e.ok("serve", "token", "create", "ann", "--role", "operator").out)
	out, errOut := e.startCmd(serve...)
	var url string
	waitFor(t, "the server", 30*time.Second, func() bool {
		if m := servingOn.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	op := client(t, tok)
	for _, args := range [][]string{{"ls", "--all", "--json"}, {"cost", "--json"}, {"status", "--json"}, {"ls"}} {
		r := op.run(append([]string{"--server", url}, args...)...)
		if r.code != 0 || strings.Contains(r.err, "could not refresh") {
			t.Errorf("%s through the server (the market takes only the file's key): exit %d %s", args, r.code, r.err)
		}
		if strings.Contains(r.out+r.err, key) {
			t.Errorf("%s sent the key to the client:\n%s%s", args, r.out, r.err)
		}
	}
	if strings.Contains(out.String()+errOut.String(), key) {
		t.Errorf("the server printed the key:\n%s%s", out, errOut)
	}
	filepath.WalkDir(e.home, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(key)) {
			t.Errorf("%s holds the key", path)
		}
		return nil
	})
}
