package cli

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/sim"
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
	t.Parallel()
	f := &factory.Factory{}
	t.Run("exec", func(t *testing.T) {
		var got *execOptions
		cmd := newExecCmd(f, func(_ context.Context, o *execOptions) error { got = o; return nil })
		if err := parseOnly(t, cmd, "--fleet", "f1", "--parallel", "8", "--timeout", "90s", "--json", "--", "nvidia-smi", "-L"); err != nil {
			t.Fatal(err)
		}
		want := &execOptions{Nodes: nodeTargets{Fleet: "f1", IDs: []string{}}, Command: "nvidia-smi -L", Parallel: 8, Timeout: 90 * time.Second, JSONFlags: cmdutil.JSONFlags{JSON: true}}
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
	t.Parallel()
	f := &factory.Factory{}
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
	t.Parallel()
	f := &factory.Factory{}
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

// refusedBeforeRun parses argv with cmd, whose runF sets *ran, and wants a
// usage error (exit 2) with nothing run. Argument counts are checked as
// the command tree checks them.
func refusedBeforeRun(t *testing.T, name string, cmd *cobra.Command, ran *bool, argv ...string) {
	t.Helper()
	*ran = false
	usageOnBadArgs(cmd)
	err := parseOnly(t, cmd, argv...)
	if err == nil || exitStatus(err) != 2 || *ran {
		t.Errorf("%s %q: err %v, ran %v; want a usage error before anything runs", name, argv, err, *ran)
	}
}

// capture returns a runF that keeps the options it is handed in *got.
func capture[T any](got **T) func(context.Context, *T) error {
	return func(_ context.Context, o *T) error { *got = o; return nil }
}

// refuse returns a runF that records in *ran that it was called.
func refuse[T any](ran *bool) func(context.Context, *T) error {
	return func(context.Context, *T) error { *ran = true; return nil }
}

// search, plan and launch parse a query, ranking and flags into options a
// test reads without a marketplace; contradicting flags stop them before
// anything is searched.
func TestSearchPlanAndLaunchParseIntoOptions(t *testing.T) {
	t.Parallel()
	f := &factory.Factory{}
	t.Run("search", func(t *testing.T) {
		var got *searchOptions
		argv := []string{"-n", "-i", "--by", "vcpu", "--all", "--save", "out.json", "-o", "+dph_total", "--limit", "5", "offers", "gpu_ram>=24", "reliability>0.95"}
		if err := parseOnly(t, newSearchCmd(f, capture(&got)), argv...); err != nil {
			t.Fatal(err)
		}
		want := &searchOptions{
			query: queryFlags{NoDefault: true, Type: "bid", Order: "+dph_total", Limit: 5, Storage: 5, SweepLimit: 1000},
			rank:  rankFlags{By: "vcpu"}, All: true, Save: "out.json", Query: []string{"offers", "gpu_ram>=24", "reliability>0.95"},
		}
		if d := cmp.Diff(want, got, cmp.AllowUnexported(searchOptions{}, queryFlags{}, rankFlags{})); d != "" {
			t.Errorf("search options (-want +got):\n%s", d)
		}
		got = nil
		if err := parseOnly(t, newSearchCmd(f, capture(&got)), "--from", "-", "--score", "cpu_cores_effective / dph_total"); err != nil {
			t.Fatal(err)
		}
		if got == nil || got.From != "-" || got.rank.Score == "" || got.All || got.query.Type != "on-demand" || got.query.Order != "score-" || len(got.Query) != 0 {
			t.Errorf("search --from - --score: %+v", got)
		}
		var ran bool
		refusedBeforeRun(t, "search", newSearchCmd(f, refuse[searchOptions](&ran)), &ran, "--from", "offers.json", "--all")
		refusedBeforeRun(t, "search", newSearchCmd(f, refuse[searchOptions](&ran)), &ran, "--by", "vcpu", "--score", "dph_total")
	})
	t.Run("plan", func(t *testing.T) {
		var got *planOptions
		if err := parseOnly(t, newPlanCmd(f, capture(&got)), "--model", "7b", "--train", "--hours", "4", "--rent", "2", "--file", "vastfleet.toml"); err != nil {
			t.Fatal(err)
		}
		if got == nil || got.Task.Model != "7b" || got.Task.Hours != 4 || !got.Train || got.Infer || got.Rent != 2 || got.File != "vastfleet.toml" ||
			got.Fleet != "default" || got.Timeout != 30*time.Minute {
			t.Fatalf("plan options: %+v", got)
		}
		// Flags typed override the task file; Visit gives them by name.
		if want := []string{"file", "hours", "model", "rent", "train"}; !cmp.Equal(got.Given, want) {
			t.Errorf("plan given flags: %q, want %q", got.Given, want)
		}
		var ran bool
		refusedBeforeRun(t, "plan", newPlanCmd(f, refuse[planOptions](&ran)), &ran, "--model", "7b", "--train", "--infer")
	})
	t.Run("launch", func(t *testing.T) {
		var got *launchOptions
		if err := parseOnly(t, newLaunchCmd(f, capture(&got)), "--count", "50", "--park", "--budget", "0", "--by", "gpu", "--session", "run:python train.py", "cpu_cores_effective>16"); err != nil {
			t.Fatal(err)
		}
		if got == nil || got.Count != 50 || !got.Park || !got.BudgetSet || got.Budget != 0 || got.rank.By != "gpu" ||
			!cmp.Equal(got.Sessions, []string{"run:python train.py"}) || !cmp.Equal(got.Query, []string{"cpu_cores_effective>16"}) {
			t.Fatalf("launch options: %+v", got)
		}
		// Defaults, as the help says.
		if !got.Backfill || got.Image != "pytorch/pytorch:latest" || got.Disk != 20 || got.Deadline != 10*time.Minute ||
			got.BootTimeout != 10*time.Minute || got.WaitMax != 6*time.Hour || got.rank.byDefault != "vcpu" || got.query.Storage != 5 {
			t.Errorf("launch defaults: %+v", got)
		}
		got = nil
		if err := parseOnly(t, newLaunchCmd(f, capture(&got)), "--from", "results.json", "--count", "3"); err != nil {
			t.Fatal(err)
		}
		if got == nil || got.From != "results.json" || got.BudgetSet || len(got.Query) != 0 {
			t.Errorf("launch --from: %+v; want no --budget given", got)
		}
		got = nil
		// A resumed launch keeps its stored settings: the ranking flags
		// are not looked at.
		if err := parseOnly(t, newLaunchCmd(f, capture(&got)), "--resume", "f1", "--type", "bid", "--on-interrupt", "keep"); err != nil {
			t.Fatal(err)
		}
		if got == nil || got.Resume != "f1" || got.OnInterrupt != "keep" {
			t.Errorf("launch --resume: %+v", got)
		}
		// --bid rents interruptible and ranks at bid prices.
		got = nil
		if err := parseOnly(t, newLaunchCmd(f, capture(&got)), "--bid", "min", "--on-outbid", "rebid", "cpu_cores_effective>16"); err != nil {
			t.Fatal(err)
		}
		if got == nil || got.Bid != "min" || got.OnOutbid != "rebid" || got.query.Type != "bid" {
			t.Errorf("launch --bid min: %+v", got)
		}
		spec, err := got.spec(launch.InterruptKeep)
		if err != nil || spec.Bid == nil || spec.Bid.Price != 0 || spec.Bid.OnOutbid != launch.OutbidRebid || spec.Create.Price != nil {
			t.Errorf("launch --bid min spec: %+v %v", spec.Bid, err)
		}
		for _, argv := range [][]string{{"--bid", "0.35", "-i"}, {"--type", "bid", "--bid", "0.35"}, {"--bid=0.35", "--type=interruptible"}} {
			got = nil
			if err := parseOnly(t, newLaunchCmd(f, capture(&got)), argv...); err != nil {
				t.Fatalf("%q: %v", argv, err)
			}
			if spec, err := got.spec(launch.InterruptKeep); err != nil || spec.Bid == nil || spec.Bid.Price != 0.35 || got.query.Type != "bid" {
				t.Errorf("%q: type %q, bid %+v, %v", argv, got.query.Type, spec.Bid, err)
			}
		}
		var ran bool
		for _, argv := range [][]string{
			{"--resume", "f1", "cpu_cores_effective>16"},
			{"--resume", "f1", "--from", "results.json"},
			{"--on-interrupt", "later"},
			{"--type", "bid"},
			{"-i"},
			{"--type", "reserved"},
			{"--bid", "min", "--type", "on-demand"},
			{"--bid", "min", "-d"},
			{"--bid", "0"},
			{"--bid", "-0.5"},
			{"--bid", "cheap"},
			{"--bid", "min", "--on-outbid", "wait"},
			{"--on-outbid", "rebid"},
			{"--items", "0..9"},
			{"--from", "results.json", "cpu_cores_effective>16"},
			{"--by", "vcpu", "--score", "dph_total"},
		} {
			refusedBeforeRun(t, "launch", newLaunchCmd(f, refuse[launchOptions](&ran)), &ran, argv...)
		}
	})
}

// The instance commands parse ids, names and flags into options without a
// store or a marketplace; bad ids, a wrong number of arguments and flags
// that contradict each other are usage errors before anything runs.
func TestInstanceCommandsParseIntoOptions(t *testing.T) {
	t.Parallel()
	f := &factory.Factory{}
	var ran bool
	t.Run("rent", func(t *testing.T) {
		var got *rentOptions
		if err := parseOnly(t, newRentCmd(f, capture(&got)), "12345", "--image", "nvidia/cuda:12.4", "--disk", "40", "--bid", "0.5", "--no-wait"); err != nil {
			t.Fatal(err)
		}
		want := &rentOptions{OfferID: 12345, Image: "nvidia/cuda:12.4", Disk: 40, Bid: 0.5, NoWait: true, Fleet: "default", Timeout: 30 * time.Minute}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("rent options (-want +got):\n%s", d)
		}
		for _, argv := range [][]string{{}, {"12345", "12346"}, {"abc"}, {"0"}} {
			refusedBeforeRun(t, "rent", newRentCmd(f, refuse[rentOptions](&ran)), &ran, argv...)
		}
	})
	t.Run("ls and cost", func(t *testing.T) {
		var ls *lsOptions
		if err := parseOnly(t, newLsCmd(f, capture(&ls)), "--fleet", "f1", "--all", "--json"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&lsOptions{Fleet: "f1", All: true, JSONFlags: cmdutil.JSONFlags{JSON: true}}, ls); d != "" {
			t.Errorf("ls options (-want +got):\n%s", d)
		}
		var cost *costOptions
		if err := parseOnly(t, newCostCmd(f, capture(&cost)), "--fleet", "f1"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&costOptions{Fleet: "f1"}, cost); d != "" {
			t.Errorf("cost options (-want +got):\n%s", d)
		}
	})
	t.Run("stop and start", func(t *testing.T) {
		var got *stateOptions
		if err := parseOnly(t, newStateCmd(f, "stop", "", capture(&got)), "3", "4", "--json"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&stateOptions{Verb: "stop", IDs: []int64{3, 4}, JSONFlags: cmdutil.JSONFlags{JSON: true}}, got); d != "" {
			t.Errorf("stop options (-want +got):\n%s", d)
		}
		if err := parseOnly(t, newStateCmd(f, "start", "", capture(&got)), "7"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&stateOptions{Verb: "start", IDs: []int64{7}}, got); d != "" {
			t.Errorf("start options (-want +got):\n%s", d)
		}
		refusedBeforeRun(t, "stop", newStateCmd(f, "stop", "", refuse[stateOptions](&ran)), &ran)
		refusedBeforeRun(t, "start", newStateCmd(f, "start", "", refuse[stateOptions](&ran)), &ran, "7", "x")
	})
	t.Run("destroy", func(t *testing.T) {
		var got *destroyOptions
		if err := parseOnly(t, newDestroyCmd(f, capture(&got)), "5", "6", "--force"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&destroyOptions{IDs: []int64{5, 6}, Force: true, Results: "/workspace/project/results"}, got); d != "" {
			t.Errorf("destroy options (-want +got):\n%s", d)
		}
		if err := parseOnly(t, newDestroyCmd(f, capture(&got)), "--all", "--fleet", "f1", "-y", "--collect"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&destroyOptions{IDs: []int64{}, All: true, Yes: true, Fleet: "f1", Collect: true, Results: "/workspace/project/results"}, got); d != "" {
			t.Errorf("destroy --all options (-want +got):\n%s", d)
		}
		for _, argv := range [][]string{{}, {"--all", "5"}, {"five"}} {
			refusedBeforeRun(t, "destroy", newDestroyCmd(f, refuse[destroyOptions](&ran)), &ran, argv...)
		}
	})
	t.Run("reconcile", func(t *testing.T) {
		var got *reconcileOptions
		if err := parseOnly(t, newReconcileCmd(f, capture(&got)), "--adopt", "--json"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&reconcileOptions{Adopt: true, JSONFlags: cmdutil.JSONFlags{JSON: true}}, got); d != "" {
			t.Errorf("reconcile options (-want +got):\n%s", d)
		}
		refusedBeforeRun(t, "reconcile", newReconcileCmd(f, refuse[reconcileOptions](&ran)), &ran, "--adopt", "--destroy-orphans")
		refusedBeforeRun(t, "reconcile", newReconcileCmd(f, refuse[reconcileOptions](&ran)), &ran, "--adopt-foreign", "--destroy-foreign")
	})
	t.Run("export and import", func(t *testing.T) {
		var ex *exportOptions
		if err := parseOnly(t, newExportCmd(f, capture(&ex)), "--format", "hostfile", "--fleet", "f1", "--mpich", "--out", "hosts.txt"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&exportOptions{Format: "hostfile", Fleet: "f1", Mpich: true, Out: "hosts.txt", Script: "train.py", IDs: []string{}}, ex); d != "" {
			t.Errorf("export options (-want +got):\n%s", d)
		}
		if err := parseOnly(t, newExportCmd(f, capture(&ex)), "--format", "torchrun", "--script", "main.py", "3", "4"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&exportOptions{Format: "torchrun", Script: "main.py", IDs: []string{"3", "4"}}, ex); d != "" {
			t.Errorf("export by ids (-want +got):\n%s", d)
		}
		if err := parseOnly(t, newExportCmd(f, capture(&ex)), "--all"); err != nil || ex.Format != "vast-instances" || !ex.All {
			t.Errorf("export --all: err %v, options %+v; want vast-instances by default", err, ex)
		}
		refusedBeforeRun(t, "export", newExportCmd(f, refuse[exportOptions](&ran)), &ran, "--format", "yaml")
		var im *importOptions
		if err := parseOnly(t, newImportCmd(f, capture(&im)), "state.json"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&importOptions{Format: "vast-instances", File: "state.json"}, im); d != "" {
			t.Errorf("import options (-want +got):\n%s", d)
		}
		refusedBeforeRun(t, "import", newImportCmd(f, refuse[importOptions](&ran)), &ran, "--format", "csv", "state.csv")
		refusedBeforeRun(t, "import", newImportCmd(f, refuse[importOptions](&ran)), &ran)
	})
	t.Run("cleanup and hosts", func(t *testing.T) {
		var cl *cleanupOptions
		if err := parseOnly(t, newCleanupCmd(f, capture(&cl)), "f1"); err != nil || cl == nil || cl.Fleet != "f1" {
			t.Errorf("cleanup f1: err %v, options %+v", err, cl)
		}
		if err := parseOnly(t, newCleanupCmd(f, capture(&cl)), "f1", "--json"); err != nil || cl == nil || !cl.JSON {
			t.Errorf("cleanup f1 --json: err %v, options %+v", err, cl)
		}
		refusedBeforeRun(t, "cleanup", newCleanupCmd(f, refuse[cleanupOptions](&ran)), &ran)
		var h *hostsOptions
		if err := parseOnly(t, newHostsCmd(f, capture(&h)), "--clear", "11", "12"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&hostsOptions{Clear: true, MachineIDs: []int64{11, 12}}, h); d != "" {
			t.Errorf("hosts options (-want +got):\n%s", d)
		}
		if err := parseOnly(t, newHostsCmd(f, capture(&h)), "--json"); err != nil || h.Clear || len(h.MachineIDs) != 0 || !h.JSON {
			t.Errorf("hosts --json: err %v, options %+v", err, h)
		}
		refusedBeforeRun(t, "hosts", newHostsCmd(f, refuse[hostsOptions](&ran)), &ran, "11")
		refusedBeforeRun(t, "hosts", newHostsCmd(f, refuse[hostsOptions](&ran)), &ran, "--clear", "eleven")
	})
	t.Run("ssh", func(t *testing.T) {
		var got *sshOptions
		if err := parseOnly(t, newSSHCmd(f, capture(&got)), "7", "--print", "--", "nvidia-smi", "-L"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&sshOptions{ID: "7", Command: []string{"nvidia-smi", "-L"}, Print: true}, got); d != "" {
			t.Errorf("ssh options (-want +got):\n%s", d)
		}
		if err := parseOnly(t, newSSHCmd(f, capture(&got)), "7"); err != nil || got.ID != "7" || got.Command != nil || got.Print {
			t.Errorf("ssh 7: err %v, options %+v", err, got)
		}
		for _, argv := range [][]string{{}, {"7", "8"}, {"--", "ls"}} {
			refusedBeforeRun(t, "ssh", newSSHCmd(f, refuse[sshOptions](&ran)), &ran, argv...)
		}
	})
	t.Run("logs", func(t *testing.T) {
		var got *logsOptions
		if err := parseOnly(t, newLogsCmd(f, capture(&got)), "4711", "--tail", "50", "--json"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&logsOptions{Target: "4711", InstanceID: 4711, Tail: 50, JSONFlags: cmdutil.JSONFlags{JSON: true}}, got); d != "" {
			t.Errorf("logs ID options (-want +got):\n%s", d)
		}
		if err := parseOnly(t, newLogsCmd(f, capture(&got)), "sweep-1", "--node", "2", "--session", "run"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&logsOptions{Target: "sweep-1", Tail: 200, Node: "2", Session: "run"}, got); d != "" {
			t.Errorf("logs JOB options (-want +got):\n%s", d)
		}
		for _, argv := range [][]string{{}, {"4711", "--node", "2"}, {"4711", "--session", "run"}, {"sweep-1", "--tail", "-1"}, {"0"}} {
			refusedBeforeRun(t, "logs", newLogsCmd(f, refuse[logsOptions](&ran)), &ran, argv...)
		}
	})
	t.Run("ssh-url, scp-url and balance", func(t *testing.T) {
		var got *routeURLOptions
		if err := parseOnly(t, newSSHURLCmd(f, capture(&got)), "12"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&routeURLOptions{Scheme: "ssh", ID: 12}, got); d != "" {
			t.Errorf("ssh-url options (-want +got):\n%s", d)
		}
		if err := parseOnly(t, newSCPURLCmd(f, capture(&got)), "12", "--json"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&routeURLOptions{Scheme: "scp", ID: 12, JSONFlags: cmdutil.JSONFlags{JSON: true}}, got); d != "" {
			t.Errorf("scp-url options (-want +got):\n%s", d)
		}
		refusedBeforeRun(t, "ssh-url", newSSHURLCmd(f, refuse[routeURLOptions](&ran)), &ran, "host")
		refusedBeforeRun(t, "scp-url", newSCPURLCmd(f, refuse[routeURLOptions](&ran)), &ran)
		var bal *balanceOptions
		if err := parseOnly(t, newBalanceCmd(f, capture(&bal)), "--json"); err != nil || bal == nil || !bal.JSON {
			t.Errorf("balance --json: err %v, options %+v", err, bal)
		}
	})
	t.Run("status and down", func(t *testing.T) {
		var st *statusOptions
		if err := parseOnly(t, newStatusCmd(f, capture(&st))); err != nil || st == nil || st.Job != "" || st.JSON {
			t.Errorf("status: err %v, options %+v; want every job", err, st)
		}
		if err := parseOnly(t, newStatusCmd(f, capture(&st)), "job-1", "--json"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&statusOptions{Job: "job-1", JSONFlags: cmdutil.JSONFlags{JSON: true}}, st); d != "" {
			t.Errorf("status JOB options (-want +got):\n%s", d)
		}
		refusedBeforeRun(t, "status", newStatusCmd(f, refuse[statusOptions](&ran)), &ran, "job-1", "job-2")
		var down *downOptions
		if err := parseOnly(t, newDownCmd(f, capture(&down)), "job-1", "--no-collect"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&downOptions{Job: "job-1", NoCollect: true}, down); d != "" {
			t.Errorf("down options (-want +got):\n%s", d)
		}
		refusedBeforeRun(t, "down", newDownCmd(f, refuse[downOptions](&ran)), &ran)
	})
}

// The tools (demo, hashwork, query parse, sim reset, sim depth, version, bench)
// parse into options as the other commands do.
func TestToolCommandsParseIntoOptions(t *testing.T) {
	t.Parallel()
	f := &factory.Factory{}
	var ran bool
	t.Run("demo and hashwork", func(t *testing.T) {
		var got *demoOptions
		if err := parseOnly(t, newDemoCmd(f, capture(&got)), "--count", "10", "--prefix", "abc", "--by", "useful", "--keep", "--cull", "0.5"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&demoOptions{Count: 10, Prefix: "abc", Seconds: 6, By: "useful", Keep: true, CullBelow: 0.5, CullAfter: 3 * time.Minute}, got); d != "" {
			t.Errorf("demo options (-want +got):\n%s", d)
		}
		// Under the root, --data-dir and --sim-speed typed are told apart
		// from their defaults.
		root := &cobra.Command{Use: "vastfleet"}
		root.PersistentFlags().String("data-dir", "", "")
		root.PersistentFlags().Float64("sim-speed", 60, "")
		root.AddCommand(newDemoCmd(f, capture(&got)))
		if err := parseOnly(t, root, "--data-dir", "d", "demo"); err != nil {
			t.Fatal(err)
		}
		if got == nil || !got.DataDirGiven || got.SimSpeedGiven || got.Count != 50 || got.Prefix != "0000" {
			t.Errorf("demo under the root: %+v; want --data-dir given, --sim-speed not", got)
		}
		refusedBeforeRun(t, "demo", newDemoCmd(f, refuse[demoOptions](&ran)), &ran, "--prefix", "xyz")
		refusedBeforeRun(t, "demo", newDemoCmd(f, refuse[demoOptions](&ran)), &ran, "--by", "dlperf")
		refusedBeforeRun(t, "demo", newDemoCmd(f, refuse[demoOptions](&ran)), &ran, "--prefix", "00000000000000000")
		refusedBeforeRun(t, "demo", newDemoCmd(f, refuse[demoOptions](&ran)), &ran, "extra")
		var hw *hashworkOptions
		if err := parseOnly(t, newHashworkCmd(f, capture(&hw)), "--prefix", "0a", "--seconds", "2"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&hashworkOptions{Prefix: "0a", Seconds: 2}, hw); d != "" {
			t.Errorf("hashwork options (-want +got):\n%s", d)
		}
	})
	t.Run("query parse", func(t *testing.T) {
		var got *queryParseOptions
		if err := parseOnly(t, newQueryCmd(f, capture(&got)), "parse", "-n", "--new", "-b", "-o", "+dph_total", "num_gpus=1", "gpu_ram>=24"); err != nil {
			t.Fatal(err)
		}
		want := &queryParseOptions{
			query: queryFlags{NoDefault: true, New: true, Type: "bid", Order: "+dph_total", Storage: 5, SweepLimit: 1000, sendUnknown: true},
			Query: []string{"num_gpus=1", "gpu_ram>=24"},
		}
		if d := cmp.Diff(want, got, cmp.AllowUnexported(queryParseOptions{}, queryFlags{})); d != "" {
			t.Errorf("query parse options (-want +got):\n%s", d)
		}
	})
	t.Run("sim reset and version", func(t *testing.T) {
		ran = false
		if err := parseOnly(t, newSimResetCmd(f, refuse[simResetOptions](&ran))); err != nil || !ran {
			t.Errorf("sim reset: err %v, ran %v", err, ran)
		}
		var v *versionOptions
		if err := parseOnly(t, newVersionCmd(f, capture(&v)), "--json"); err != nil || v == nil || !v.JSON {
			t.Errorf("version --json: err %v, options %+v", err, v)
		}
		refusedBeforeRun(t, "version", newVersionCmd(f, refuse[versionOptions](&ran)), &ran, "1.0")
	})
	t.Run("sim depth", func(t *testing.T) {
		var got *simDepthOptions
		if err := parseOnly(t, newSimDepthCmd(f, capture(&got)), "--seeds", "1,3,7", "--offers", "2000", "--json"); err != nil {
			t.Fatal(err)
		}
		want := &simDepthOptions{Seeds: "1,3,7", Offers: 2000, JSONFlags: cmdutil.JSONFlags{JSON: true}, seeds: []int64{1, 3, 7}}
		if d := cmp.Diff(want, got, cmp.AllowUnexported(simDepthOptions{})); d != "" {
			t.Errorf("sim depth options (-want +got):\n%s", d)
		}
		got = nil
		if err := parseOnly(t, newSimDepthCmd(f, capture(&got))); err != nil || got == nil || !cmp.Equal(got.seeds, []int64{1, 2, 3, 4, 5}) || got.Offers != sim.DefaultOffers {
			t.Errorf("sim depth defaults: err %v, options %+v", err, got)
		}
		refusedBeforeRun(t, "sim depth", newSimDepthCmd(f, refuse[simDepthOptions](&ran)), &ran, "--seeds", "5-1")
	})
	t.Run("bench", func(t *testing.T) {
		var bl *benchLaunchOptions
		if err := parseOnly(t, newBenchCmd(f, capture(&bl), nil), "launch", "--count", "20", "--profile", "none,bench", "--seed", "7", "--json"); err != nil {
			t.Fatal(err)
		}
		if bl == nil || bl.Config.Count != 20 || bl.Config.Seed != 7 || bl.Config.Deadline != 10*time.Minute || !bl.JSON ||
			!cmp.Equal(bl.Profiles, []string{"none", "bench"}) {
			t.Errorf("bench launch options: %+v", bl)
		}
		bl = nil
		if err := parseOnly(t, newBenchCmd(f, capture(&bl), nil), "launch"); err != nil || bl == nil || !cmp.Equal(bl.Profiles, []string{"realistic", "harsh"}) || bl.Config.Count != 300 {
			t.Errorf("bench launch defaults: err %v, options %+v", err, bl)
		}
		refusedBeforeRun(t, "bench launch", newBenchCmd(f, refuse[benchLaunchOptions](&ran), nil), &ran, "launch", "--count", "0")
		var br *benchRankOptions
		if err := parseOnly(t, newBenchCmd(f, nil, capture(&br)), "rank", "--offers", "1000", "--pairs", "2", "--file", "offers.json"); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&benchRankOptions{Offers: 1000, Pairs: 2, File: "offers.json", Seconds: 3}, br); d != "" {
			t.Errorf("bench rank options (-want +got):\n%s", d)
		}
		var bs *benchScaleOptions
		if err := parseOnly(t, newBenchScaleCmd(f, capture(&bs)), "--nodes", "1000", "--sync-mb", "2.5", "--mem-floor-mb", "4000",
			"--heartbeat", "1s", "--keep", "run", "--json", "gpu_name=RTX_3090"); err != nil {
			t.Fatal(err)
		}
		c := bs.Config
		if c.Nodes != 1000 || c.SyncBytes != 2_500_000 || c.MemFloor != 4_000_000_000 || c.Heartbeat != time.Second || c.Dir != "run" ||
			!bs.JSON || !cmp.Equal(c.Query, []string{"gpu_name=RTX_3090"}) || c.TimeScale != 60 || c.Faults != "none" || c.Work != 10000 {
			t.Errorf("bench scale options: %+v", bs)
		}
		// Past launch's limit the benchmark is refused with it.
		refusedBeforeRun(t, "bench scale", newBenchScaleCmd(f, refuse[benchScaleOptions](&ran)), &ran, "--nodes", "1001")
		refusedBeforeRun(t, "bench scale", newBenchScaleCmd(f, refuse[benchScaleOptions](&ran)), &ran, "--sync-mb", "0.000001", "--sync-files", "10")
	})
}
