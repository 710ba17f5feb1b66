package coord

import (
	"context"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// A coordinator started with its own defaults (stop after 30m) must tell
// each fleet's agents the dead-man switch that fleet was launched with,
// including a fleet launched, or relaunched, while it runs.
func TestHeartbeatReplyCarriesTheFleetsOwnDeadManSwitch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newFakeClock()
	r := newRig(t, func(c *Config) {
		c.Clock = clk
		c.HeartbeatInterval = 10 * time.Second
		c.OrphanAfter = 30 * time.Minute
		c.OrphanPolicy = wire.PolicyStop
	})
	beat := func(fleet, token string) wire.HeartbeatReply {
		t.Helper()
		var reply wire.HeartbeatReply
		hb := wire.Heartbeat{Fleet: fleet, Node: "n1", InstanceID: 7}
		if code, _ := r.do("POST", wire.PathHeartbeat, token, hb, &reply); code != 200 {
			t.Fatalf("heartbeat %s: %d", fleet, code)
		}
		return reply
	}
	// No recorded policy (a fleet from before fleet_policy): the
	// coordinator's own.
	if got := beat("alpha", r.node("n1")); got.OrphanAfterS != 1800 || got.OrphanPolicy != wire.PolicyStop {
		t.Fatalf("alpha without a policy: %+v, want the coordinator's 1800 s stop", got)
	}
	// A launch beside the running coordinator records its own switch.
	betaTok, _, err := r.db.FleetTokens(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.db.SetFleetPolicy(ctx, "beta", 10*time.Minute, wire.PolicyDestroy); err != nil {
		t.Fatal(err)
	}
	betaTok = r.enroll("beta", betaTok, 500, "n1") // beta's instance's own credential
	if got := beat("beta", betaTok); got.OrphanAfterS != 600 || got.OrphanPolicy != wire.PolicyDestroy {
		t.Fatalf("beta launched with 10m destroy: got %+v", got)
	}
	// Fleets keep apart.
	if err := r.db.SetFleetPolicy(ctx, "alpha", 5*time.Minute, wire.PolicyStop); err != nil {
		t.Fatal(err)
	}
	clk.Advance(11 * time.Second) // past the cached answer
	if got := beat("alpha", r.node("n1")); got.OrphanAfterS != 300 || got.OrphanPolicy != wire.PolicyStop {
		t.Fatalf("alpha launched with 5m stop: got %+v", got)
	}
	if got := beat("beta", betaTok); got.OrphanAfterS != 600 || got.OrphanPolicy != wire.PolicyDestroy {
		t.Fatalf("beta after alpha's launch: got %+v", got)
	}
	// A relaunch that changes the switch reaches the agents within a
	// heartbeat interval.
	if err := r.db.SetFleetPolicy(ctx, "beta", 2*time.Hour, wire.PolicyStop); err != nil {
		t.Fatal(err)
	}
	clk.Advance(11 * time.Second)
	if got := beat("beta", betaTok); got.OrphanAfterS != 7200 || got.OrphanPolicy != wire.PolicyStop {
		t.Fatalf("beta relaunched with 2h stop: got %+v", got)
	}
}
