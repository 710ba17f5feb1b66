package jobfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFleetJob(t *testing.T) {
	j, err := Parse("f.yaml", []byte(`
name: search
gpu: vast
query: "rentable=True cpu_cores_effective>=8"
count: 40
min_ready: 36
max_budget: 12.5
deadline: 10m
park: true
image: ubuntu:22.04
env: {PREFIX: "00000"}
setup:
  - echo one
  - echo two
run: ./search --prefix $PREFIX
results: /workspace/project/results
auto_destroy: false
max_duration: 1h
orphan_after: 20m
on_short_hardware: warn
max_lifetime: 12h
idle: {after: 30m, below: 5}
stopped_for: 24h
cull: {below: 0.5, after: 10m, metric: keys_per_s}
`))
	if err != nil {
		t.Fatal(err)
	}
	if j.OnShortHardware != "warn" {
		t.Errorf("on_short_hardware %q", j.OnShortHardware)
	}
	if j.MaxLifetime != 12*time.Hour || j.IdleAfter != 30*time.Minute || j.IdleBelow != 5 || j.StoppedFor != 24*time.Hour {
		t.Errorf("teardown ladder: lifetime %v, idle %v below %v%%, stopped for %v", j.MaxLifetime, j.IdleAfter, j.IdleBelow, j.StoppedFor)
	}
	if c := j.Cull; c == nil || c.Below != 0.5 || c.After != 10*time.Minute || c.Metric != "keys_per_s" {
		t.Errorf("cull %+v", j.Cull)
	}
	if j, err := Parse("f.yaml", []byte("image: x\nrun: true\nprobe: ./bench.sh\n")); err != nil || *j.Probe != (Probe{Command: "./bench.sh"}) {
		t.Errorf("probe: %v %+v", err, j)
	}
	if j, err := Parse("f.yaml", []byte("image: x\nrun: true\nprobe: {command: ./bench.sh, top: 3, timeout: 90s}\n")); err != nil ||
		*j.Probe != (Probe{Command: "./bench.sh", Top: 3, Timeout: 90 * time.Second}) {
		t.Errorf("probe mapping: %v %+v", err, j)
	}
	if j, err := Parse("f.yaml", []byte("image: x\nrun: true\ncull: {below: 0.3}\n")); err != nil || j.Cull.After != DefaultCullAfter {
		t.Errorf("cull without after: %v %+v", err, j)
	}
	if j.Market != "vast" || j.Budget != 12.5 || j.Count != 40 || j.MinReady != 36 || !j.Park || j.By != "vcpu" ||
		j.AutoDestroy || j.MaxDuration != time.Hour || j.OrphanAfter != 20*time.Minute || len(j.Setup) != 2 || j.Env["PREFIX"] != "00000" {
		t.Errorf("parsed %+v", j)
	}
}

func TestParsePlannedJob(t *testing.T) {
	j, err := Parse("f.yaml", []byte("task:\n  model: 7b\n  precision: bf16\n  mode: finetune\n  hours: 2\noption: best_value\nimage: pytorch/pytorch:latest\nrun: python train.py\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !j.Planned() || j.Task.Model != "7b" || j.Option != OptionBestValue || !j.AutoDestroy || j.Count != 1 {
		t.Errorf("parsed %+v", j)
	}
	if j, err := Parse("f.yaml", []byte("image: x\nsetup: apt-get update\nrun: true\n")); err != nil || len(j.Setup) != 1 {
		t.Errorf("one setup command: %v %+v", err, j)
	}
}

// Every mistake names its line and a fix.
func TestParseErrorsNameLineAndFix(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"unknown key", "image: x\nrun: true\ncuont: 3\n", 3, "did you mean count?"},
		{"bad count", "image: x\nrun: true\ncount: 0\n", 3, "a count from 1 to 1000"},
		{"bad duration", "image: x\nrun: true\nmax_duration: forever\n", 3, "a duration such as"},
		{"both rent ways", "image: x\nrun: true\nquery: rentable=True\ntask:\n  model: 7b\n", 4, "remove query"},
		{"bad option", "image: x\nrun: true\ntask:\n  model: 7b\noption: priciest\n", 5, "cheapest, best_value or fastest"},
		{"option without task", "image: x\nrun: true\noption: cheapest\n", 3, "add a task"},
		{"no model", "image: x\nrun: true\ntask:\n  hours: 2\n", 3, "say what runs"},
		{"bad market", "image: x\nrun: true\ngpu: aws\n", 3, "vast (vast.ai) or sim"},
		{"bad hardware policy", "image: x\nrun: true\non_short_hardware: ignore\n", 3, "replace, warn or keep"},
		{"budget twice", "image: x\nrun: true\nbudget: 1\nmax_budget: 2\n", 4, "keep one"},
		{"missing image", "run: true\n", 0, "name the docker image"},
		{"nothing to run", "image: x\n", 0, "give run: COMMAND"},
		{"sessions never end", "image: x\nsessions:\n  web: serve\n", 2, "add max_duration"},
		{"relative results", "image: x\nrun: true\nresults: out\n", 3, "an absolute path"},
		{"yaml syntax", "image: x\nrun: [true\n", 2, "YAML syntax"},
		{"wrong type", "image: x\nrun: true\ncount: many\n", 3, ""},
		{"items nobody runs", "image: x\nrun: true\nitems: 0..9\n", 3, "put {item} in run"},
		{"backward range", "image: x\nrun: echo {item}\nitems: 9..0\n", 3, "runs backwards"},
		{"idle without below", "image: x\nrun: true\nidle: {after: 30m}\n", 3, "idle: {after: 30m, below: 5}"},
		{"cull without below", "image: x\nrun: true\ncull: {after: 5m}\n", 3, "cull: {below: 0.5, after: 5m"},
		{"cull of the whole fleet", "image: x\nrun: true\ncull: {below: 1.5}\n", 3, "between 0 and 1"},
		{"cull at once", "image: x\nrun: true\ncull: {below: 0.5, after: 10s}\n", 3, "at least 1m"},
		{"probe without a command", "image: x\nrun: true\nprobe: {top: 3}\n", 3, "no command"},
		{"probe of too many types", "image: x\nrun: true\nprobe: {command: bench, top: 50}\n", 3, "top from 1 to 20"},
		{"probe of a planned task", "image: x\nrun: true\ntask:\n  model: 7b\nprobe: bench\n", 5, "ranks a query's offers"},
		{"bad lifetime", "image: x\nrun: true\nmax_lifetime: a day\n", 3, "a duration such as"},
		{"missing items file", "image: x\nrun: echo {item}\nitems: nosuch.txt\n", 3, "relative to the task file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("job.yaml", []byte(tc.text))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err %v, want *Error", err)
			}
			if e.Line != tc.line {
				t.Errorf("line %d, want %d (%v)", e.Line, tc.line, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "job.yaml") {
				t.Errorf("%q lacks %q", err, tc.want)
			}
		})
	}
}

// Paths in a task file are relative to the file, not to where up runs.
func TestPathsResolveAgainstTheTaskFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "items.txt"), []byte("a\nb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(path, []byte("image: x\nworkdir: src\nitems: items.txt\nrun: echo {item}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if j.Workdir != filepath.Join(dir, "src") || j.Items != "@"+filepath.Join(dir, "items.txt") {
		t.Errorf("workdir %q items %q, want both under %s", j.Workdir, j.Items, dir)
	}
	for _, spec := range []string{"0..9", "lr=0.1,0.01;bs=32"} {
		j, err := Parse(path, []byte("image: x\nitems: \""+spec+"\"\nrun: echo {item}\n"))
		if err != nil || j.Items != spec {
			t.Errorf("items %q: %v, %q", spec, err, j.Items)
		}
	}
}

// validate:, spot_checks: and verify: choose how results are checked; a
// mistake names the key and the fix.
func TestParseValidation(t *testing.T) {
	base := "image: ubuntu:22.04\nrun: ./work {item}\nitems: 1..300\n"
	for _, c := range []struct {
		yaml string
		want Validation
		bad  string // the key the error names
	}{
		{yaml: "validate: {replicas: 2, quorum: 2}\n", want: Validation{Replicas: 2, Quorum: 2}},
		{yaml: "validate: {replicas: 3}\n", want: Validation{Replicas: 3, Quorum: 2}},
		{yaml: "validate: adaptive\nspot_checks: 5%\n", want: Validation{Adaptive: true, SpotChecks: 0.05}},
		{yaml: "spot_checks: 0.1\nverify: ./check.sh\n", want: Validation{SpotChecks: 0.1, Verify: "./check.sh"}},
		{yaml: "validate: {replicas: 1}\n", bad: "validate"},
		{yaml: "validate: {replicas: 3, quorum: 4}\n", bad: "validate"},
		{yaml: "validate: {replicas: 2, qorum: 2}\n", bad: "validate"},
		{yaml: "validate: always\n", bad: "validate"},
		{yaml: "spot_checks: 1.5\n", bad: "spot_checks"},
		{yaml: "spot_checks: lots\n", bad: "spot_checks"},
	} {
		j, err := Parse("f.yaml", []byte(base+c.yaml))
		if c.bad != "" {
			var e *Error
			if !errors.As(err, &e) || e.Key != c.bad || e.Fix == "" {
				t.Errorf("%q: err %v, want an error naming %s with a fix", c.yaml, err, c.bad)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.yaml, err)
			continue
		}
		if j.Validate != c.want {
			t.Errorf("%q: %+v, want %+v", c.yaml, j.Validate, c.want)
		}
	}
	// Replication checks item results: without items it has nothing to do.
	if _, err := Parse("f.yaml", []byte("image: ubuntu:22.04\nrun: ./work\nvalidate: adaptive\n")); err == nil ||
		!strings.Contains(err.Error(), "validate") {
		t.Errorf("validate without items: %v", err)
	}
	// verify alone checks findings: no items needed.
	if j, err := Parse("f.yaml", []byte("image: ubuntu:22.04\nrun: ./work\nverify: ./check\n")); err != nil || j.Validate.Verify != "./check" {
		t.Errorf("verify without items: %+v %v", j, err)
	}
}
