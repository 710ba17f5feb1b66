package cli

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// parseOnly runs cmd's flag and argument parsing with argv and nothing
// else: the command's runF captured the options instead of acting.
func parseOnly(t *testing.T, cmd *cobra.Command, argv ...string) error {
	t.Helper()
	cmd.SetArgs(argv)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return cmd.ExecuteContext(context.Background())
}

// The fan-out commands parse flags and arguments into options that a test
// can read without a marketplace, SSH or a store: what a user typed is
// checked apart from what the command then does.
func TestFanOutCommandsParseIntoOptions(t *testing.T) {
	f := &factory{}
	t.Run("exec", func(t *testing.T) {
		var got *execOptions
		cmd := newExecCmd(f, func(_ context.Context, o *execOptions) error { got = o; return nil })
		if err := parseOnly(t, cmd, "--fleet", "f1", "--parallel", "8", "--timeout", "90s", "--json", "--", "nvidia-smi", "-L"); err != nil {
			t.Fatal(err)
		}
		want := &execOptions{Nodes: nodeTargets{Fleet: "f1", IDs: []string{}}, Command: "nvidia-smi -L", Parallel: 8, Timeout: 90 * time.Second, JSON: true}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("exec options (-want +got):\n%s", d)
		}
		got = nil
		if err := parseOnly(t, newExecCmd(f, func(_ context.Context, o *execOptions) error { got = o; return nil }), "12", "13", "--", "true"); err != nil {
			t.Fatal(err)
		}
		if got == nil || !cmp.Equal(got.Nodes.IDs, []string{"12", "13"}) || got.Command != "true" || got.Parallel != 64 {
			t.Errorf("exec by ids: %+v", got)
		}
		called := false
		err := parseOnly(t, newExecCmd(f, func(context.Context, *execOptions) error { called = true; return nil }), "--all", "true")
		var ue usageError
		if !errors.As(err, &ue) || called {
			t.Errorf("exec without --: err %v, ran %v; want a usage error before anything runs", err, called)
		}
	})
	t.Run("sync", func(t *testing.T) {
		var got *syncOptions
		cmd := newSyncCmd(f, func(_ context.Context, o *syncOptions) error { got = o; return nil })
		if err := parseOnly(t, cmd, "./proj", "--id", "5,6", "--dest", "/workspace/x", "--exclude", "data/", "--exclude", "*.ckpt", "--no-relay"); err != nil {
			t.Fatal(err)
		}
		want := &syncOptions{Nodes: nodeTargets{IDs: []string{"5", "6"}}, Src: "./proj", Dest: "/workspace/x",
			Excludes: []string{"data/", "*.ckpt"}, Parallel: 64, RelaySeeds: 3, NoRelay: true}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("sync options (-want +got):\n%s", d)
		}
	})
	t.Run("setup", func(t *testing.T) {
		var got *setupOptions
		cmd := newSetupCmd(f, func(_ context.Context, o *setupOptions) error { got = o; return nil })
		if err := parseOnly(t, cmd, "--all", "--phase", "pip install torch==2.4.0", "--phase", "pip install -r r.txt", "--verify", "python -V", "--force"); err != nil {
			t.Fatal(err)
		}
		want := &setupOptions{Nodes: nodeTargets{All: true, IDs: []string{}}, Phases: []string{"pip install torch==2.4.0", "pip install -r r.txt"},
			Verify: "python -V", Force: true, Parallel: 64}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("setup options (-want +got):\n%s", d)
		}
		called := false
		err := parseOnly(t, newSetupCmd(f, func(context.Context, *setupOptions) error { called = true; return nil }), "--all")
		var ue usageError
		if !errors.As(err, &ue) || called {
			t.Errorf("setup without --phase: err %v, ran %v; want a usage error before anything runs", err, called)
		}
	})
	t.Run("collect", func(t *testing.T) {
		var got *collectOptions
		cmd := newCollectCmd(f, func(_ context.Context, o *collectOptions) error { got = o; return nil })
		if err := parseOnly(t, cmd, "--fleet", "f2", "--remote", "/workspace/out", "--to", "res", "--parallel", "4"); err != nil {
			t.Fatal(err)
		}
		want := &collectOptions{Nodes: nodeTargets{Fleet: "f2"}, RemoteDir: "/workspace/out", To: "res", Parallel: 4}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("collect options (-want +got):\n%s", d)
		}
	})
}

// Flags whose default means "the fleet's own setting" are told apart from
// the same value typed out: the options record which were given.
func TestDefaultsAndGivenFlagsAreToldApart(t *testing.T) {
	f := &factory{}
	var reap *reapOptions
	if err := parseOnly(t, newReapCmd(f, func(_ context.Context, o *reapOptions) error { reap = o; return nil }), "--fleet", "a", "--orphan-after", "10m"); err != nil {
		t.Fatal(err)
	}
	if reap == nil || reap.Fleet != "a" || reap.After != 10*time.Minute || !reap.AfterSet || reap.PolicySet {
		t.Errorf("reap options: %+v; want --orphan-after given, --orphan-policy not", reap)
	}
	var coord *coordOptions
	if err := parseOnly(t, newCoordCmd(f, func(_ context.Context, o *coordOptions) error { coord = o; return nil }), "--tunnel=false", "--fleet", "a", "--fleet", "b"); err != nil {
		t.Fatal(err)
	}
	if coord == nil || coord.Tunnel || !coord.TunnelSet || !cmp.Equal(coord.Fleets, []string{"a", "b"}) || coord.Addr != "127.0.0.1:8470" {
		t.Errorf("coord options: %+v; want --tunnel=false given, two fleets, the default address", coord)
	}
	var depth *depthOptions
	market := newMarketCmd(f, func(_ context.Context, o *depthOptions) error { depth = o; return nil })
	if err := parseOnly(t, market, "depth", "--top", "10,300", "rentable=True", "cpu_cores_effective>16"); err != nil {
		t.Fatal(err)
	}
	if depth == nil || !cmp.Equal(depth.Tops, []int{10, 300}) || !cmp.Equal(depth.Query, []string{"rentable=True", "cpu_cores_effective>16"}) {
		t.Errorf("market depth options: %+v", depth)
	}
}

func TestUpParsesItsFileAndRefusesResumeWithOne(t *testing.T) {
	f := &factory{}
	var got *upOptions
	capture := func(_ context.Context, o *upOptions) error { got = o; return nil }
	if err := parseOnly(t, newUpCmd(f, capture), "examples/sweep.yaml", "--results", "out", "--detach", "--coord-addr", "0.0.0.0:9000"); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.File != "examples/sweep.yaml" || got.ResultsDir != "out" || !got.Detach || got.CoordAddr != "0.0.0.0:9000" || !got.coordAddrGiven {
		t.Errorf("up options: %+v", got)
	}
	got = nil
	if err := parseOnly(t, newUpCmd(f, capture)); err != nil || got == nil || got.File != "vastfleet.yaml" || got.coordAddrGiven {
		t.Errorf("up with no file: err %v, options %+v; want vastfleet.yaml and the default address", err, got)
	}
	got = nil
	err := parseOnly(t, newUpCmd(f, capture), "--resume", "job-1", "other.yaml")
	var ue usageError
	if !errors.As(err, &ue) || got != nil {
		t.Errorf("up --resume JOB FILE: err %v, ran %v; want a usage error before anything runs", err, got != nil)
	}
}
