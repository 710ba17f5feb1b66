package sim

import (
	"math"
	"time"
)

// Per-endpoint rate limits (Faults.EndpointLimits). vast limits each
// endpoint per identity as a minimum interval between calls; its OpenAPI
// files give a "threshold" per endpoint (vast-api.md §10): show instance
// 2.0, list instances 1.0, manage (start, stop, label) 1.0, bulk start
// 2.0, destroy 3.0, create 4.5, change bid 5.5, and search "10 per minute
// per IP". The unit is not stated. Here a threshold is calls per market
// second, with that many (at least one) in hand, per API key and
// endpoint, which puts most endpoints near vast's "about one call a
// second"; search is 10 a market minute. Follow-up pages of a listing
// (after_token) are not limited, as the official CLI fetches them back to
// back.
var endpointLimits = map[string]float64{
	"POST /api/v0/bundles/{$}":    10.0 / 60,
	"PUT /api/v0/search/asks/{$}": 10.0 / 60,
	"PUT /api/v0/asks/{id}/{$}":   4.5,
	// vast publishes no figure for bulk create; one call a second, as for
	// most endpoints, lets 64 offers a second be rented.
	"POST /api/v0/asks/bulk/{$}":               1.0,
	"GET /api/v1/instances/{$}":                1.0,
	"GET /api/v0/instances/{id}/{$}":           2.0,
	"PUT /api/v0/instances/{id}/{$}":           1.0,
	"PUT /api/v0/instances/{$}":                2.0,
	"DELETE /api/v0/instances/{id}/{$}":        3.0,
	"PUT /api/v0/instances/bid_price/{id}/{$}": 5.5,
}

// endpointBucket is one key's allowance on one endpoint.
type endpointBucket struct {
	tokens float64
	at     time.Time
}

// admitEndpoint takes one call from key's allowance on the route pattern
// at now, and reports whether there was one. m.mu is held.
func (m *Market) admitEndpoint(key, pattern string, now time.Time) bool {
	rate, ok := endpointLimits[pattern]
	if !ok || !m.cfg.Faults.EndpointLimits {
		return true
	}
	burst := math.Max(1, math.Floor(rate))
	if m.endpoints == nil {
		m.endpoints = map[[2]string]*endpointBucket{}
	}
	k := [2]string{key, pattern}
	b, ok := m.endpoints[k]
	if !ok {
		b = &endpointBucket{tokens: burst, at: now}
		m.endpoints[k] = b
	}
	if now.After(b.at) {
		b.tokens = math.Min(burst, b.tokens+now.Sub(b.at).Seconds()*rate)
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
