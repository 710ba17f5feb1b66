package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func needAgentTools(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the agent and runs a fleet")
	}
	for _, tool := range []string{"curl", "sha256sum", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the agent's onstart needs %s", tool)
		}
	}
}

// TestUpRunsAFleetJobEndToEnd: a task file with a workdir, setup, a run
// command that prints a finding and writes a result file; up rents,
// syncs, sets up, runs, collects, destroys and reports.
func TestUpRunsAFleetJobEndToEnd(t *testing.T) {
	needAgentTools(t)
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "work.sh"), []byte(`mkdir -p results
echo "{\"metric\":\"things_per_s\",\"value\":10}"
echo "{\"found\":{\"rank\":\"$VASTFLEET_NODE_RANK\",\"setup\":\"$(cat setup-ran)\"}}"
echo "node $VASTFLEET_NODE_RANK of $VASTFLEET_NUM_NODES" > results/out.txt
`), 0o644)
	file := filepath.Join(dir, "job.yaml")
	os.WriteFile(file, []byte(`name: t
query: "rentable=True num_gpus=1 dph_total<1"
count: 2
image: ubuntu:22.04
workdir: `+src+`
setup: echo yes > setup-ran
run: sh work.sh
results: /workspace/project/results
max_duration: 2h
`), 0o644)
	res := filepath.Join(dir, "out")
	r := e.ok("up", file, "--agent-bin", agentBin, "--results", res)
	if !strings.Contains(r.out, "cost report for job t-") || !strings.Contains(r.out, "instances still live 0") {
		t.Errorf("report:\n%s\nstderr:\n%s", r.out, r.err)
	}
	outs, _ := filepath.Glob(filepath.Join(res, "t-*", "*", "out.txt"))
	if len(outs) != 2 {
		t.Errorf("collected %v, want out.txt from 2 nodes\nstderr:\n%s", outs, r.err)
	}
	finds, _ := filepath.Glob(filepath.Join(res, "t-*", "findings.jsonl"))
	if len(finds) != 1 || strings.Count(readFile(t, finds[0]), `\"setup\":\"yes\"`)+strings.Count(readFile(t, finds[0]), `"setup":"yes"`) != 2 {
		t.Errorf("findings %v", finds)
	}
	ls := e.ok("ls", "--json")
	if strings.Contains(ls.out, `"state":"running"`) {
		t.Errorf("instances left: %s", ls.out)
	}
	st := e.ok("status")
	if !strings.Contains(st.out, "done") {
		t.Errorf("status:\n%s", st.out)
	}
}
