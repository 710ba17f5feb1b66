package usage

import (
	"errors"
	"fmt"
	"testing"
)

func TestFanOutIsPartialOnlyWhenSomeFailed(t *testing.T) {
	if err := FanOut("sync", 0, 3); err != nil {
		t.Errorf("none failed: %v", err)
	}
	err := fmt.Errorf("job j: %w", FanOut("sync", 1, 3))
	if !errors.Is(err, ErrPartial) || !errors.As(err, new(Partial)) || err.Error() != "job j: sync failed on 1 of 3 nodes" {
		t.Errorf("one of three failed: %v, want a partial", err)
	}
	if err := FanOut("sync", 3, 3); errors.Is(err, ErrPartial) || err.Error() != "sync failed on all 3 nodes" {
		t.Errorf("all failed: %v, want a plain error", err)
	}
}
