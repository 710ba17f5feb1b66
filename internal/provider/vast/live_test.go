//go:build live

package vast

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider/providertest"
)

// TestLiveConformance runs the suite against real vast.ai. It rents one
// instance, the cheapest verified on-demand offer with a 10 GB disk (and
// never one above $0.50/h), and destroys it in a cleanup that survives the
// test's own cancellation. Run with:
//
//	VAST_API_KEY=... go test -tags live -run Live -timeout 60m ./internal/provider/vast/
func TestLiveConformance(t *testing.T) {
	key := os.Getenv("VAST_API_KEY")
	if key == "" {
		t.Skip("VAST_API_KEY not set")
	}
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		c, err := New(Options{
			BaseURL: os.Getenv("VAST_URL"),
			APIKey:  key,
			Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
			// Stay well inside the documented per-endpoint limits.
			RateLimit: 1,
			Burst:     2,
		})
		if err != nil {
			t.Fatal(err)
		}
		return providertest.Harness{
			Provider: c,
			Keys:     c,
			Poll:     10 * time.Second,
			Timeout:  15 * time.Minute,
			Image:    "ubuntu:22.04",
			Disk:     10,
			MaxPrice: 0.50,
		}
	})
}
