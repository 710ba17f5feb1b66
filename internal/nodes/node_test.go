package nodes

import (
	"fmt"
	"testing"

	"github.com/vastfleet/vastfleet/internal/remote"
)

func fleetOf(n int) []Node {
	ns := make([]Node, n)
	for i := range ns {
		ns[i] = Node{Name: fmt.Sprintf("f-node-%d", i), Rank: i, ID: int64(100 + i), Host: fmt.Sprintf("10.0.%d.%d", i/256, i%256), NumGPU: i % 3}
	}
	return ns
}

// Each node's command is what WithEnv(RankEnv) makes of it alone, byte for
// byte: the command the remote shell runs is unchanged, quoting included.
func TestRankCommandsAreWithEnvOfRankEnv(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 5} {
		ns := fleetOf(n)
		if n == 5 {
			ns[4].Name = "it's node 4" // a quote in a value
		}
		cmd := `echo "$VASTFLEET_NODE_RANK" && [ -n "$VASTFLEET_NODE_IPS" ]`
		got := RankCommands(ns, cmd)
		if len(got) != n {
			t.Fatalf("%d commands for %d nodes", len(got), n)
		}
		for i, node := range ns {
			if want := remote.WithEnv(RankEnv(ns, node), cmd); got[i] != want {
				t.Errorf("%d nodes, node %d:\n got %q\nwant %q", n, i, got[i], want)
			}
		}
	}
	got := RankCommands(fleetOf(3), "true")[2]
	want := "export VASTFLEET_GPUS_PER_NODE=2; export VASTFLEET_MASTER_ADDR=10.0.0.0; export VASTFLEET_NODE_IPS='10.0.0.0\n10.0.0.1\n10.0.0.2'; " +
		"export VASTFLEET_NODE_NAME=f-node-2; export VASTFLEET_NODE_RANK=2; export VASTFLEET_NUM_NODES=3; true"
	if got != want {
		t.Errorf("node 2 of 3:\n got %q\nwant %q", got, want)
	}
}

// A replacement run alone in a culled node's place is told that node's
// rank and name, and the fleet's size and addresses, its own in its place.
func TestPlacedCommandsTellTheFleet(t *testing.T) {
	t.Parallel()
	by := Node{Name: "f-node-1", Rank: 1, ID: 200, Host: "10.9.9.9", NumGPU: 1}
	got := PlacedCommands(fleetOf(3), []Node{by}, "true")
	want := "export VASTFLEET_GPUS_PER_NODE=1; export VASTFLEET_MASTER_ADDR=10.0.0.0; export VASTFLEET_NODE_IPS='10.0.0.0\n10.9.9.9\n10.0.0.2'; " +
		"export VASTFLEET_NODE_NAME=f-node-1; export VASTFLEET_NODE_RANK=1; export VASTFLEET_NUM_NODES=3; true"
	if len(got) != 1 || got[0] != want {
		t.Errorf("replacement of node 1 of 3:\n got %q\nwant %q", got, want)
	}
}

// The commands of a 1,000-node exec, each node's built alone against
// RankCommands:
//
//	go test -run '^$' -bench ExecCommands -benchmem ./internal/nodes
func BenchmarkExecCommands(b *testing.B) {
	ns := fleetOf(1000)
	b.Run("per-node", func(b *testing.B) {
		for b.Loop() {
			for _, n := range ns {
				_ = remote.WithEnv(RankEnv(ns, n), "true")
			}
		}
	})
	b.Run("RankCommands", func(b *testing.B) {
		for b.Loop() {
			_ = RankCommands(ns, "true")
		}
	})
}
