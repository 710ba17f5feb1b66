package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/sim"
)

func TestSimServeRefusesExposure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--api-key", ""}, "always checks a key"},
		{[]string{"--addr", "0.0.0.0:0"}, "--public"},
		{[]string{"--addr", ":0"}, "--public"},
		{[]string{"--addr", "0.0.0.0:0", "--public"}, "default API key"},
		{[]string{"--addr", "0.0.0.0:0", "--public", "--api-key", sim.DefaultAPIKey}, "default API key"},
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
	t.Parallel()
	const key = "s3cret-key-of-mine-0123"
	for _, args := range [][]string{
		{"--api-key", key},
		{}, // the default key is not printed either
	} {
		var errb syncBuffer
		home := t.TempDir()
		ios := &iostreams.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &errb,
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
		if strings.Contains(banner, key) || strings.Contains(banner, sim.DefaultAPIKey) {
			t.Errorf("banner shows the key: %q", banner)
		}
	}
}

// sim serve --clock manual: market time stands still however long the
// client takes, and moves only when the client says so.
func TestSimServeManualClock(t *testing.T) {
	t.Parallel()
	var errb syncBuffer
	home := t.TempDir()
	ios := &iostreams.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &errb,
		Getenv: func(k string) string { return map[string]string{"VASTFLEET_HOME": home}[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, ios, []string{"sim", "serve", "--addr", "127.0.0.1:0", "--no-hosts", "--offers", "10", "--faults", "none", "--clock", "manual"})
	}()
	addr := ""
	for i := 0; i < 500 && addr == ""; i++ {
		if m := regexp.MustCompile(`marketplace on (http://127\.0\.0\.1:\d+)`).FindStringSubmatch(errb.String()); m != nil {
			addr = m[1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	if addr == "" {
		t.Fatalf("no banner: %q", errb.String())
	}
	if !strings.Contains(errb.String(), "manual time") {
		t.Errorf("banner does not say the time is manual: %q", errb.String())
	}
	clockAt := func(method, path string) (now time.Time, manual bool) {
		t.Helper()
		req, _ := http.NewRequest(method, addr+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Now    time.Time `json:"now"`
			Manual bool      `json:"manual"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, err)
		}
		return body.Now, body.Manual
	}
	t0, manual := clockAt("GET", "/sim/clock")
	if !manual {
		t.Error("/sim/clock says the clock is not manual")
	}
	time.Sleep(300 * time.Millisecond) // a slow client: the market waits for it
	if t1, _ := clockAt("GET", "/sim/clock"); !t1.Equal(t0) {
		t.Errorf("market time moved from %v to %v without being told", t0, t1)
	}
	if t2, _ := clockAt("POST", "/sim/advance?d=10m"); !t2.Equal(t0.Add(10 * time.Minute)) {
		t.Errorf("after advance 10m: %v, want %v", t2, t0.Add(10*time.Minute))
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	r := newEnv(t).fails("sim", "serve", "--no-hosts", "--clock", "manual", "--state", t.TempDir())
	if r.code != 2 || !strings.Contains(r.err, "--clock manual with --state") {
		t.Errorf("--clock manual --state: exit %d %q", r.code, r.err)
	}
	r = newEnv(t).fails("sim", "serve", "--no-hosts", "--clock", "fast")
	if r.code != 2 || !strings.Contains(r.err, "use scaled or manual") {
		t.Errorf("--clock fast: exit %d %q", r.code, r.err)
	}
}
