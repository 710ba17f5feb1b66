package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// remoteSimClock reads the time of a simulator served elsewhere (`vastfleet
// sim serve`), so costs and timeouts are computed in the market's time.
type remoteSimClock struct {
	url    string
	client *http.Client
	scale  float64
	last   time.Time
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
		return nil, fmt.Errorf("--market sim --api-url %s: reading the simulator's clock: %w (is it a `vastfleet sim serve`?)", baseURL, err)
	}
	c.scale, c.last = r.Scale, r.Now
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

// Now asks the simulator; if it cannot be reached, the last answer is the
// best estimate (time never goes backwards).
func (c *remoteSimClock) Now() time.Time {
	r, err := c.fetch(context.Background())
	if err == nil && r.Now.After(c.last) {
		c.last = r.Now
	}
	return c.last
}
