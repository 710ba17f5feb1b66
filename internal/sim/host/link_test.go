package host

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLinkPacesSSHTraffic: a machine with a 16 Mb/s downlink and an 8 Mb/s
// uplink takes at least the link's time for what goes in (2 MB on stdin:
// 1 s) and what comes out (1 MB of output: 1 s), and every byte arrives.
// Only lower bounds are checked: a busy machine makes it slower, never
// faster than the link.
func TestLinkPacesSSHTraffic(t *testing.T) {
	t.Parallel()
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	key, line := testKey(t)
	ports, err := m.Boot(Spec{ID: 1, Keys: []string{line}, Link: Link{DownMbps: 16, UpMbps: 8}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := dial(ports[0], key)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	in := bytes.Repeat([]byte("0123456789abcdef"), 2e6/16)
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.Stdin, s.Stdout = bytes.NewReader(in), &out
	start := time.Now()
	if err := s.Run("wc -c"); err != nil {
		t.Fatal(err)
	}
	down := time.Since(start)
	s.Close()
	if got := strings.TrimSpace(out.String()); got != "2000000" {
		t.Fatalf("the machine received %s bytes of 2000000", got)
	}
	// 2 MB at 2 MB/s, less the first burst.
	if want := 900 * time.Millisecond; down < want {
		t.Errorf("2 MB in through a 16 Mb/s downlink took %v, want at least %v", down, want)
	}

	start = time.Now()
	got, err := run(t, c, "head -c 1000000 /dev/zero")
	up := time.Since(start)
	if err != nil || len(got) != 1e6 {
		t.Fatalf("1 MB out: %d bytes, %v", len(got), err)
	}
	if want := 900 * time.Millisecond; up < want {
		t.Errorf("1 MB out through an 8 Mb/s uplink took %v, want at least %v", up, want)
	}
	t.Logf("2 MB in: %v (link time 1 s); 1 MB out: %v (link time 1 s)", down.Round(time.Millisecond), up.Round(time.Millisecond))
}
