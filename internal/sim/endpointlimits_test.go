package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestEndpointLimits: with vast's per-endpoint limits on, each endpoint
// has its own allowance per key in market time: a second listing in the
// same market second is 429 with vast's text, another endpoint is not
// held up by it, a second later the listing answers again; search allows
// one call per six market seconds; creates come four at once.
func TestEndpointLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 4, Faults: Faults{EndpointLimits: true}})
	list := func() (int, string) {
		st, _, body := h.do("GET", "/api/v1/instances/", nil, nil)
		return st, string(body)
	}
	if st, body := list(); st != 200 {
		t.Fatalf("first listing: %d %s", st, body)
	}
	if st, body := list(); st != 429 || !strings.Contains(body, "API requests too frequent endpoint threshold=1") {
		t.Fatalf("second listing in the same second: %d %q, want 429", st, body)
	}
	if st, _, body := h.do("GET", "/api/v0/users/current", nil, nil); st != 200 {
		t.Fatalf("another endpoint after the listing's 429: %d %s", st, body)
	}
	h.clock.Advance(time.Second)
	if st, body := list(); st != 200 {
		t.Fatalf("listing a second later: %d %s", st, body)
	}

	search := func() int {
		st, _, _ := h.do("POST", "/api/v0/bundles/", map[string]any{"rentable": map[string]any{"eq": true}, "limit": 5}, nil)
		return st
	}
	if st := search(); st != 200 {
		t.Fatalf("first search: %d", st)
	}
	if st := search(); st != 429 {
		t.Fatalf("second search at once: %d, want 429", st)
	}
	h.clock.Advance(6 * time.Second)
	if st := search(); st != 200 {
		t.Fatalf("search six seconds later: %d", st)
	}

	h.clock.Advance(time.Minute)
	offers := h.search(`{"rentable":{"eq":true},"order":[["dph_total","asc"]],"limit":6}`)
	codes := ""
	for _, o := range offers[:5] {
		st, _, _ := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", o.ID), map[string]any{"image": "ubuntu:22.04", "disk": 10}, nil)
		codes += fmt.Sprint(st, " ")
	}
	if codes != "200 200 200 200 429 " {
		t.Fatalf("five creates at once: %s, want four in hand", codes)
	}
}
