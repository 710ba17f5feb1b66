package cli

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSimServeRefusesExposure(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--api-key", ""}, "always checks a key"},
		{[]string{"--addr", "0.0.0.0:0"}, "--public"},
		{[]string{"--addr", ":0"}, "--public"},
		{[]string{"--addr", "0.0.0.0:0", "--public"}, "default API key"},
		{[]string{"--addr", "0.0.0.0:0", "--public", "--api-key", simAPIKey}, "default API key"},
	} {
		r := e.fails(append([]string{"sim", "serve", "--no-hosts", "--offers", "10"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.err, tc.want) {
			t.Errorf("sim serve %v: exit %d, stderr %q; want a usage error mentioning %q", tc.args, r.code, r.err, tc.want)
		}
	}
}

// syncBuffer is a stderr the test reads while the server writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSimServeBannerHidesTheKey(t *testing.T) {
	const key = "s3cret-key-of-mine-0123"
	for _, args := range [][]string{
		{"--api-key", key},
		{}, // the default key is not printed either
	} {
		var errb syncBuffer
		home := t.TempDir()
		ios := &IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &errb,
			Getenv: func(k string) string { return map[string]string{"VASTFLEET_HOME": home}[k] }}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() {
			done <- Main(ctx, ios, append([]string{"sim", "serve", "--addr", "127.0.0.1:0", "--no-hosts", "--offers", "10", "--faults", "none"}, args...))
		}()
		for i := 0; i < 500 && !strings.Contains(errb.String(), "marketplace on"); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if code := <-done; code != 0 {
			t.Fatalf("sim serve %v: exit %d\n%s", args, code, errb.String())
		}
		banner := errb.String()
		if !strings.Contains(banner, "marketplace on http://127.0.0.1:") {
			t.Fatalf("no banner: %q", banner)
		}
		if strings.Contains(banner, key) || strings.Contains(banner, simAPIKey) {
			t.Errorf("banner shows the key: %q", banner)
		}
	}
}
