package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// TestLiarSpeaksWithTheAgentsCredential: a lying machine's operator finds
// the agent's credential on the container's disk and attacks a real
// coordinator with it. The coordinator takes what the credential allows
// (its node's own leases: wrong results, forged findings, which only
// validation catches) and refuses the rest: results for items never
// leased and heartbeats in another node's name.
func TestLiarSpeaksWithTheAgentsCredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := coord.OpenDB(ctx, filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bootstrap, _, err := db.FleetTokens(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	members := coord.MembershipFunc(func(context.Context, string) (map[int64]coord.Instance, error) {
		return map[int64]coord.Instance{1: {MachineID: 11}, 2: {MachineID: 12}}, nil
	})
	srv, err := coord.New(coord.Config{DB: db, Members: members})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.Close()
	enroll := func(id int64, node string) string {
		b, _ := json.Marshal(wire.EnrollRequest{Fleet: "f", InstanceID: id, Node: node})
		req, _ := http.NewRequest("POST", hs.URL+wire.PathEnroll, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+bootstrap)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rep wire.EnrollReply
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&rep) != nil || rep.Token == "" {
			t.Fatalf("enroll %s: %d", node, resp.StatusCode)
		}
		return rep.Token
	}
	enroll(1, "node-0")
	tok := enroll(2, "node-1")
	if err := db.AddItems(ctx, "f", []string{"a", "b", "c", "d"}); err != nil {
		t.Fatal(err)
	}

	h := newHarness(t, Config{Seed: 3, HostDir: t.TempDir(), Faults: Faults{Liars: 1}})
	t.Cleanup(func() { h.m.Close() })
	id := h.create(h.cheapOffer().ID, "liar")
	h.clock.Set(h.stateOf(id).ReadyAt.Add(time.Minute))
	h.m.Sync()
	// The agent keeps its credential in its state directory, as on vast.
	state := filepath.Join(h.m.HostDir(id), ".vastfleet-agent")
	os.MkdirAll(state, 0o700)
	cred, _ := json.Marshal(map[string]any{"coord": hs.URL, "fleet": "f", "instance_id": 2, "node": "node-1", "token": tok})
	if err := os.WriteFile(filepath.Join(state, "credential.json"), cred, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		tl := h.m.Liars()
		if tl.Tried[AttackUnleased] >= 2 && tl.Tried[AttackOtherNode] >= 2 && tl.Tried[AttackWrongResult] >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator made too few attacks in 30 s: %+v", tl)
		}
		time.Sleep(100 * time.Millisecond)
	}
	tl := h.m.Liars()
	if tl.Accepted[AttackUnleased] != 0 || tl.Accepted[AttackOtherNode] != 0 {
		t.Errorf("the coordinator took what the credential does not allow: %+v", tl)
	}
	if tl.Accepted[AttackWrongResult] == 0 || tl.Accepted[AttackForgedFinding] == 0 {
		t.Errorf("the node's own leases and findings were refused without validation: %+v", tl)
	}
	t.Logf("attacks %+v", tl)
}
