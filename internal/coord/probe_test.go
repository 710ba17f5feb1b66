package coord

import (
	"context"
	"testing"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// The boot probe comes with the first heartbeat only; the coordinator
// keeps it for the node, in the live view and across a restart.
func TestProbeKeptFromFirstHeartbeat(t *testing.T) {
	r := newRig(t, nil)
	tok := r.node("n1")
	hb := heartbeat("alpha", "n1")
	hb.Probe = &wire.Probe{Status: wire.ProbeOK, Cores: 3.2, CoresMethod: "availability", Workers: 2, GPUs: 1,
		Advertised: wire.Capacity{Cores: 8, GPUs: 2}}
	if code, _ := r.do("POST", wire.PathHeartbeat, tok, hb, nil); code != 200 {
		t.Fatalf("heartbeat with probe: %d", code)
	}
	if code, _ := r.do("POST", wire.PathHeartbeat, tok, heartbeat("alpha", "n1"), nil); code != 200 {
		t.Fatalf("heartbeat: %d", code)
	}
	check := func(when string) {
		snap := r.srv.Snapshot(context.Background(), "alpha")
		if len(snap.Nodes) != 1 || snap.Nodes[0].Probe == nil || snap.Nodes[0].Probe.Cores != 3.2 || snap.Nodes[0].Probe.Advertised.GPUs != 2 {
			t.Fatalf("%s: nodes %+v", when, snap.Nodes)
		}
	}
	check("live")
	r.srv.Close() // flushes the nodes
	r.start(nil)
	check("after a restart")

	bad := heartbeat("alpha", "n1")
	bad.Probe = &wire.Probe{Status: "great", Cores: 1}
	if code, _ := r.do("POST", wire.PathHeartbeat, tok, bad, nil); code != 400 {
		t.Errorf("a probe with an unknown status: %d, want 400", code)
	}
}
