package coord

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// slowMembers answers like a marketplace for a large account: a listing
// takes a while and knows only the instances rented before it (ids up to
// listed); each instance can be shown alone. Calls are counted.
type slowMembers struct {
	listings, shows atomic.Int64
	delay           time.Duration
	listed, rented  int64
}

func (m *slowMembers) Instances(ctx context.Context, fleet string) (map[int64]Instance, error) {
	m.listings.Add(1)
	select {
	case <-time.After(m.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := map[int64]Instance{}
	for id := int64(1); id <= m.listed; id++ {
		out[id] = Instance{MachineID: 100 + id, Image: "img"}
	}
	return out, nil
}

func (m *slowMembers) Instance(ctx context.Context, fleet string, id int64) (Instance, bool, error) {
	m.shows.Add(1)
	if id < 1 || id > m.rented {
		return Instance{}, false, nil
	}
	return Instance{MachineID: 100 + id, Image: "img"}, true, nil
}

// A fleet of 1,000 enrolling at once, 900 of them rented after the last
// listing: every instance gets its credential on its first try, each late
// one is shown alone, and nothing lists the account again. Before, every
// miss re-listed the account (40 pages at 1,000 instances) under a lock,
// the instances behind it were refused, and credential writes met
// SQLITE_BUSY: at 1,000 nodes, 5.6k membership checks and 750 credential
// writes failed and fewer than 300 nodes got ready.
func testAThousandEnrollAtOnce(t *testing.T, backend string) {
	members := &slowMembers{delay: 100 * time.Millisecond, listed: 100, rented: 1000}
	r := newRigOn(t, backend, func(c *Config) { c.Members = members })
	const n = 1000
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed = map[int]int{}
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	start := make(chan struct{})
	sem := make(chan struct{}, 256) // this machine's file descriptors, not the coordinator's limit
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func(id int64) {
			defer wg.Done()
			<-start
			sem <- struct{}{}
			defer func() { <-sem }()
			code := postJSON(t, client, r.http.URL+wire.PathEnroll, r.agent, wire.EnrollRequest{Fleet: "alpha", InstanceID: id}, nil)
			if code != http.StatusOK {
				mu.Lock()
				failed[code]++
				mu.Unlock()
			}
		}(int64(i))
	}
	close(start)
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("enrollments refused or failed, by status: %v", failed)
	}
	if l, s := members.listings.Load(), members.shows.Load(); l > 0 || s != n {
		t.Errorf("%d enrollments: the fleet listed %d times, %d instances shown (want 0 and %d)", n, l, s, n)
	}
	// An instance the marketplace does not show is refused.
	if code := postJSON(t, client, r.http.URL+wire.PathEnroll, r.agent, wire.EnrollRequest{Fleet: "alpha", InstanceID: n + 1}, nil); code != http.StatusForbidden {
		t.Errorf("instance %d, never rented: %d, want 403", n+1, code)
	}
	live, err := r.db.liveCredentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != n {
		t.Errorf("%d credentials stored, want %d", len(live), n)
	}
	t.Logf("%d enrollments: %d listings, %d shows", n, members.listings.Load(), members.shows.Load())
}
