// Package remoteclock is the clock of a simulator served elsewhere
// (`vastfleet sim serve`), read over HTTP from its /sim/clock, so that a
// process attached to it computes costs and timeouts in the market's time.
// It is apart from package clock so that what needs only a clock (the SSH
// layer, the agent) does not link net/http through it.
package remoteclock

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
)

// Reply is what a simulator's /sim/clock answers.
type Reply struct {
	Now    time.Time `json:"now"`
	Manual bool      `json:"manual"`
	Scale  float64   `json:"scale"`
	// Shared: the local market (clock.Shared), whose scale is its pace
	// between sessions and 0 while one is open.
	Shared bool `json:"shared"`
}

// Clock reads the time of a served simulator. It is safe for concurrent
// use.
type Clock struct {
	url    string
	client *http.Client
	scale  float64 // 0: the simulator's clock is manual
	shared bool
	wall   clock.Wall

	mu        sync.Mutex
	last      time.Time // the simulator's last answer
	fetchedAt time.Time // wall time of that answer
	shown     time.Time // the latest time Now returned
}

var _ clock.Clock = (*Clock)(nil)

// RefreshEvery is how long one reading of a remote simulator's clock is
// extrapolated before it is read again.
const RefreshEvery = 250 * time.Millisecond

// New reads the clock of the simulator served at baseURL once, and
// returns a Clock that keeps reading it. The error is the HTTP client's,
// which may quote baseURL.
func New(ctx context.Context, baseURL string) (*Clock, error) {
	c := &Clock{url: strings.TrimSuffix(baseURL, "/") + "/sim/clock", client: &http.Client{Timeout: 5 * time.Second}}
	r, err := c.fetch(ctx)
	if err != nil {
		return nil, err
	}
	c.scale, c.last, c.fetchedAt, c.shown, c.shared = r.Scale, r.Now, c.wall.Now(), r.Now, r.Shared
	if r.Manual {
		c.scale = 0 // a manual clock moves only when told: read it every time
	}
	return c, nil
}

func (c *Clock) fetch(ctx context.Context) (Reply, error) {
	var r Reply
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return r, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

// Scale is how many market seconds pass per wall second; 0 when the
// simulator's clock is manual.
func (c *Clock) Scale() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.scale
}

// Now is the simulator's time. Rent goroutines call it concurrently and
// often, so one answer serves for RefreshEvery of wall time, advanced at
// the simulator's scale in between; if the simulator cannot be reached,
// the last estimate stands (time never goes backwards).
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	wall := c.wall.Now()
	if !c.fetchedAt.IsZero() && wall.Sub(c.fetchedAt) < RefreshEvery && (c.scale > 0 || c.shared) {
		est := c.last.Add(time.Duration(float64(wall.Sub(c.fetchedAt)) * c.scale))
		if est.After(c.shown) {
			c.shown = est
		}
		return c.shown
	}
	if r, err := c.fetch(context.Background()); err == nil {
		c.last, c.fetchedAt = r.Now, wall
		if r.Shared {
			// A shared market's pace changes as sessions come and go.
			c.shared, c.scale = true, r.Scale
		}
		if r.Now.After(c.shown) {
			c.shown = r.Now
		}
	}
	return c.shown
}

// Sleep waits d of market time as d/scale of wall time (d itself when the
// simulator's clock is manual), or until ctx ends.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	scale := c.scale
	c.mu.Unlock()
	if scale > 0 {
		d = time.Duration(float64(d) / scale)
	}
	return c.wall.Sleep(ctx, d)
}
