package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider/vast"
)

// remoteSimClock reads the time of a simulator served elsewhere (`vastfleet
// sim serve`), so costs and timeouts are computed in the market's time.
type remoteSimClock struct {
	url    string
	client *http.Client
	scale  float64

	mu        sync.Mutex
	last      time.Time // the simulator's last answer
	fetchedAt time.Time // wall time of that answer
	shown     time.Time // the latest time Now returned
}

type simClockReply struct {
	Now    time.Time `json:"now"`
	Manual bool      `json:"manual"`
	Scale  float64   `json:"scale"`
}

func newRemoteSimClock(ctx context.Context, baseURL string) (*remoteSimClock, error) {
	c := &remoteSimClock{url: strings.TrimSuffix(baseURL, "/") + "/sim/clock", client: &http.Client{Timeout: 5 * time.Second}}
	r, err := c.fetch(ctx)
	if err != nil {
		return nil, fmt.Errorf("--market sim --api-url %s: reading the simulator's clock: %w (is it a `vastfleet sim serve`?)",
			vast.RedactURL(baseURL), vast.RedactError(err))
	}
	c.scale, c.last, c.fetchedAt, c.shown = r.Scale, r.Now, time.Now(), r.Now
	if r.Manual {
		c.scale = 0 // a manual clock moves only when told: read it every time
	}
	return c, nil
}

func (c *remoteSimClock) fetch(ctx context.Context) (simClockReply, error) {
	var r simClockReply
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

// Now is the simulator's time. Rent goroutines call it concurrently and
// often, so one answer serves for refreshEvery of wall time, advanced at
// the simulator's scale in between; if the simulator cannot be reached,
// the last estimate stands (time never goes backwards).
func (c *remoteSimClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	wall := time.Now()
	if !c.fetchedAt.IsZero() && wall.Sub(c.fetchedAt) < refreshEvery && c.scale > 0 {
		est := c.last.Add(time.Duration(float64(wall.Sub(c.fetchedAt)) * c.scale))
		if est.After(c.shown) {
			c.shown = est
		}
		return c.shown
	}
	if r, err := c.fetch(context.Background()); err == nil {
		c.last, c.fetchedAt = r.Now, wall
		if r.Now.After(c.shown) {
			c.shown = r.Now
		}
	}
	return c.shown
}

// refreshEvery is how long one reading of a remote simulator's clock is
// extrapolated before it is read again.
const refreshEvery = 250 * time.Millisecond
