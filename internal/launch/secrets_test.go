package launch

import (
	"context"
	"errors"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vastfleet/vastfleet/internal/launch/launchsim"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

// createRecorder passes everything through and keeps every create body.
type createRecorder struct {
	provider.Provider
	mu      sync.Mutex
	creates []provider.CreateRequest
}

func (c *createRecorder) CreateInstance(ctx context.Context, offerID int64, req provider.CreateRequest) (provider.Created, error) {
	c.mu.Lock()
	c.creates = append(c.creates, req)
	c.mu.Unlock()
	return c.Provider.CreateInstance(ctx, offerID, req)
}

// TestResumeGetsSecretsBack: the fleet row keeps env values, onstart and
// session commands redacted; the secret file gives them back to a resume,
// whose creates carry the real values; with that file gone, resume refuses
// rather than rent machines with "<redacted>" in their env.
func TestResumeGetsSecretsBack(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, 8, sim.Faults{})
	rec := &createRecorder{Provider: e.M.P}
	m := fleet.Manager{P: rec, S: e.M.S, Clock: e.M.Clock, Log: e.M.Log, Grace: e.M.Grace, PollEvery: e.M.PollEvery}
	spec := baseSpec("sec", 12)
	spec.Create.Env = map[string]string{"HF_TOKEN": "hf_s3cret"}
	spec.Create.Onstart = "echo onstart-s3cret"
	spec.Sessions = []Session{{Name: "train", Command: "python t.py --key sess-s3cret"}}

	ctx, cancel := context.WithCancel(context.Background())
	var rented atomic.Int32
	_, err := Run(ctx, &m, spec, launchsim.Candidates(e.Mkt, 10), func(ev Event) {
		if ev.Event == EvRented && rented.Add(1) == 3 {
			cancel()
		}
	})
	cancel()
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	f, err := e.St.GetFleet(context.Background(), "sec")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"hf_s3cret", "onstart-s3cret", "sess-s3cret"} {
		if strings.Contains(string(f.Spec), s) {
			t.Errorf("fleet row spec holds %s", s)
		}
	}
	its, _ := e.St.FleetIntents(context.Background(), "sec")
	for _, it := range its {
		if strings.Contains(string(it.Request), "s3cret") {
			t.Errorf("intent %d request holds a secret: %s", it.ID, it.Request)
		}
	}

	before := len(rec.creates)
	if _, err := Resume(context.Background(), &m, "sec", nil); err != nil {
		t.Fatal(err)
	}
	after := rec.creates[before:]
	if len(after) == 0 {
		t.Fatal("resume rented nothing")
	}
	for _, c := range after {
		if c.Env["HF_TOKEN"] != "hf_s3cret" || !strings.Contains(c.Onstart, "onstart-s3cret") || !strings.Contains(c.Onstart, "sess-s3cret") {
			t.Fatalf("a create after resume lacks the secrets: env %v onstart %q", c.Env, c.Onstart)
		}
	}
	checkNoLeaks(t, e.Mkt, e.St)

	if err := os.Remove(e.St.SecretPath(secretName("sec"))); err != nil {
		t.Fatal(err)
	}
	before = len(rec.creates)
	_, err = Resume(context.Background(), &m, "sec", nil)
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "env and onstart") {
		t.Errorf("resume without the secrets file: %v", err)
	}
	if len(rec.creates) != before {
		t.Errorf("resume without the secrets file rented %d", len(rec.creates)-before)
	}
}
