package launch

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/usage"
)

func TestOnInterruptAsksOnlyWhenNothingWasGiven(t *testing.T) {
	for _, c := range []struct {
		given  string
		canAsk bool
		mode   string
		ask    bool
	}{
		{InterruptDestroyAll, true, InterruptDestroyAll, false},
		{"", true, InterruptKeep, true},
		{"", false, InterruptDestroyUnready, false},
	} {
		if mode, ask := OnInterrupt(c.given, c.canAsk); mode != c.mode || ask != c.ask {
			t.Errorf("OnInterrupt(%q, %v) = %q, %v; want %q, %v", c.given, c.canAsk, mode, ask, c.mode, c.ask)
		}
	}
}

func TestViewStreamsJSONOrWritesLines(t *testing.T) {
	at := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	var out, errOut, js bytes.Buffer
	v := NewView(&iostreams.IOStreams{Out: &out, ErrOut: &errOut}, &js)
	v.Event(Event{Event: "rented", At: at, InstanceID: 5, Msg: "offer 9"})
	if !strings.HasPrefix(js.String(), `{"event":"rented","at":"2026-12-07T06:00:00Z","instance_id":5,"msg":"offer 9"`) || errOut.Len() != 0 {
		t.Errorf("JSON %q, log %q", js.String(), errOut.String())
	}
	v = NewView(&iostreams.IOStreams{Out: &out, ErrOut: &errOut}, nil)
	v.Event(Event{Event: "rented", At: at, InstanceID: 5, Msg: "offer 9"})
	v.Event(Event{Event: EvSummary, At: at})
	if got, want := errOut.String(), "06:00:00 rented      instance 5 offer 9\n"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}
	err := v.Finish(context.Background(), nil, "f", Summary{Asked: 2, Ready: 1}, nil, false)
	if !errors.As(err, new(usage.Partial)) {
		t.Errorf("a launch short of its quorum: %v, want partial (exit 3)", err)
	}
}

func TestWaitForWindowRefusesABadCondition(t *testing.T) {
	poll := func(context.Context) ([]market.Ranked, error) { return nil, nil }
	_, err := WaitForWindow(context.Background(), "vcpu>>", 1, poll, time.Hour, clock.Wall{}, &bytes.Buffer{})
	if !errors.As(err, new(usage.Error)) || !strings.HasPrefix(err.Error(), "--wait-for: ") {
		t.Errorf("bad --wait-for: %v, want a usage error", err)
	}
}
