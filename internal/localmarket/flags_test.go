package localmarket

import (
	"slices"
	"testing"
)

// TestNotAppliedNamesOnlyGivenFlagsThatDiffer: a command is told of each
// market flag it gave that the running market does not apply, with both
// values, and of no flag it left alone or that agrees.
func TestNotAppliedNamesOnlyGivenFlagsThatDiffer(t *testing.T) {
	t.Parallel()
	runs := Settings{Seed: 1, Faults: "none", Liars: 0.1, Spoof: 0, EndpointLimits: false}
	asked := Flags{Seed: 7, Faults: "harsh", Liars: 0.1, Spoof: 0.5, EndpointLimits: true}
	for _, tc := range []struct {
		set  []string
		want []string
	}{
		{nil, nil},
		{[]string{"sim-liars"}, nil},
		{[]string{"sim-seed", "sim-faults"}, []string{"--sim-seed 7 (it has seed 1)", "--sim-faults harsh (it has none)"}},
		{[]string{"sim-spoof", "sim-endpoint-limits"}, []string{"--sim-spoof 0.5 (it has 0)", "--sim-endpoint-limits=true (it has false)"}},
	} {
		set := map[string]bool{}
		for _, s := range tc.set {
			set[s] = true
		}
		if got := runs.NotApplied(asked, set); !slices.Equal(got, tc.want) {
			t.Errorf("given %v: %q, want %q", tc.set, got, tc.want)
		}
	}
}

// TestDaemonCommandPassesTheMarketFlags: the local market a command
// starts gets the command's market flags, --sim-speed only when given.
func TestDaemonCommandPassesTheMarketFlags(t *testing.T) {
	t.Parallel()
	cmd := DaemonCommand("/bin/vastfleet", "/data", Flags{Seed: 3, Faults: "none", Liars: -1, Spoof: 0.25, EndpointLimits: true, Speed: 60}, []string{"A=1"})
	want := []string{"/bin/vastfleet", "--data-dir", "/data", "--market", "sim", "--sim-seed", "3", "--sim-faults", "none",
		"--sim-liars", "-1", "--sim-spoof", "0.25", "--sim-endpoint-limits", "sim", "daemon"}
	if !slices.Equal(cmd.Args, want) || !slices.Equal(cmd.Env, []string{"A=1"}) {
		t.Fatalf("argv %q env %q, want %q", cmd.Args, cmd.Env, want)
	}
	cmd = DaemonCommand("/bin/vastfleet", "/data", Flags{Faults: "none", Speed: 60, SpeedSet: true}, nil)
	if i := slices.Index(cmd.Args, "--sim-speed"); i < 0 || cmd.Args[i+1] != "60" {
		t.Fatalf("argv %q: want --sim-speed 60", cmd.Args)
	}
}
