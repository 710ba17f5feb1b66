package sim

import (
	"math"
	"time"
)

// bucket is one API key's token bucket; it fills at Faults.RateLimit per
// market second up to Faults.RateBurst. Market time moves only while
// clients wait, so a client is limited by how it paces itself, never by
// how busy the machine running it is.
type bucket struct {
	tokens float64
	at     time.Time
}

// admit takes a token from key's bucket at now, and reports whether there
// was one. m.mu is held.
func (m *Market) admit(key string, now time.Time) bool {
	f := m.cfg.Faults
	if f.RateLimit <= 0 {
		return true
	}
	burst := math.Max(1, f.RateBurst)
	if m.buckets == nil {
		m.buckets = map[string]*bucket{}
	}
	b, ok := m.buckets[key]
	if !ok {
		b = &bucket{tokens: burst, at: now}
		m.buckets[key] = b
	}
	if now.After(b.at) {
		b.tokens = math.Min(burst, b.tokens+now.Sub(b.at).Seconds()*f.RateLimit)
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
