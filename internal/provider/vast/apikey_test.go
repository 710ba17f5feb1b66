package vast

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestFlagKeyWarns(t *testing.T) {
	rk, err := ResolveAPIKey("k1", func(string) string { return "" }, t.TempDir())
	if err != nil || rk.Key != "k1" || len(rk.Warnings) != 1 || !strings.Contains(rk.Warnings[0], "process list") {
		t.Fatalf("flag key: %+v, %v; want k1 with a process-list warning", rk, err)
	}
	rk, err = ResolveAPIKey("", func(k string) string { return map[string]string{"VAST_API_KEY": "k2"}[k] }, t.TempDir())
	if err != nil || rk.Key != "k2" || len(rk.Warnings) != 0 {
		t.Fatalf("env key: %+v, %v; want k2 and no warning", rk, err)
	}
}

func TestKeyFileReadableByOthersWarns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vast_api_key")
	if err := os.WriteFile(path, []byte("filekey\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) string { return "" }
	rk, err := ResolveAPIKey("", noEnv, dir)
	if err != nil || rk.Key != "filekey" || len(rk.Warnings) != 0 {
		t.Fatalf("0600 key file: %+v, %v; want the key, no warning", rk, err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		rk, err = ResolveAPIKey("", noEnv, dir)
		if err != nil || rk.Key != "filekey" || len(rk.Warnings) != 1 || !strings.Contains(rk.Warnings[0], "chmod 600") {
			t.Fatalf("key file mode %04o: %+v, %v; want the key with a chmod warning", mode, rk, err)
		}
	}
}

func TestRequireTLSRefusesPlainHTTPOffThisMachine(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://console.vast.ai", true},
		{"http://console.vast.ai", false},
		{"http://10.0.0.5:8765", false},
		{"http://127.0.0.1:8765", true},
		{"http://[::1]:8765", true},
		{"http://localhost:8765", true},
	} {
		_, err := New(Options{BaseURL: tc.url, RequireTLS: true})
		if (err == nil) != tc.ok {
			t.Errorf("New(%s, RequireTLS): err = %v, want ok=%v", tc.url, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "https://") {
			t.Errorf("New(%s) error does not say what to use: %v", tc.url, err)
		}
	}
	if _, err := New(Options{BaseURL: "http://10.0.0.5:8765"}); err != nil {
		t.Errorf("without RequireTLS (the simulator), plain http was refused: %v", err)
	}
}

func TestCredentialsInURLsAreNeverEchoed(t *testing.T) {
	const secret = "SeCrEt123"
	for _, raw := range []string{
		"http://user:" + secret + "@host/",
		"http://" + secret + "@host/",
		"https://host/api?api_key=" + secret,
		"https://host/api?x=1&token=" + secret + "#frag",
		"http://host/%zz?api_key=" + secret, // does not parse
		"::" + secret,
	} {
		if got := RedactURL(raw); strings.Contains(got, secret) {
			t.Errorf("RedactURL(%q) = %q: shows the secret", raw, got)
		}
		_, err := New(Options{BaseURL: raw})
		if err == nil {
			t.Errorf("New accepted %q", raw)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("New(%q) error echoes the secret: %v", raw, err)
		}
	}
	if got := RedactURL("https://host/api/v0?limit=5"); got != "https://host/api/v0?limit=5" {
		t.Errorf("a URL without credentials changed: %q", got)
	}
	// A request error names the URL: redacted, with the cause kept.
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://127.0.0.1:1/x?api_key="+secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = http.DefaultClient.Do(req)
	red := RedactError(err)
	if err == nil || strings.Contains(red.Error(), secret) || !errors.Is(red, syscall.ECONNREFUSED) {
		t.Errorf("RedactError(%v) = %v: want the secret gone and the cause kept", err, red)
	}
}
