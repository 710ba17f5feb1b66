package cli

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/sim"
)

// runWithEnv runs one command with the given environment only.
func runWithEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	ios := &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errb, Getenv: func(k string) string { return env[k] }}
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
