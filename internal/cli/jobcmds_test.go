package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// keptJob runs a two-node job with auto_destroy: false, so that its nodes
// (and their session logs) outlive up; it returns the job's name.
func keptJob(t *testing.T, e *env, agentBin string) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "job.yaml")
	os.WriteFile(file, []byte(`name: kept
query: "rentable=True num_gpus=1 dph_total<1"
count: 2
image: ubuntu:22.04
run: echo "hello from rank $VASTFLEET_NODE_RANK"
auto_destroy: false
`), 0o644)
	r := e.ok("up", file, "--agent-bin", agentBin, "--results", filepath.Join(dir, "out"), "--json")
	return decode[jobReport](t, r.out).Job
}

// TestLogsOfAJob: logs JOB, from another process than up, shows each
// node's run session output; --node picks one node by rank or instance
// id; an unknown node is a usage error.
func TestLogsOfAJob(t *testing.T) {
	t.Parallel()
	needAgentTools(t)
	agentBin := buildAgent(t)
	e := newEnv(t)
	e.speed = "120"
	job := keptJob(t, e, agentBin)
	defer e.ok("down", job)

	all := decode[[]nodeLog](t, e.ok("logs", job, "--json").out)
	if len(all) != 2 {
		t.Fatalf("logs --json: %+v", all)
	}
	for _, n := range all {
		if n.Error != "" || n.Source != "sessions" || !strings.Contains(n.Log, "--- session run") || !strings.Contains(n.Log, "hello from rank ") {
			t.Errorf("node %s: error %q, %s log:\n%s", n.Node, n.Error, n.Source, n.Log)
		}
	}
	one := e.ok("logs", job, "--node", "1")
	if strings.Count(one.out, "==> ") != 1 || !strings.Contains(one.out, job+"-node-1") || !strings.Contains(one.out, "hello from rank 1") {
		t.Errorf("logs --node 1:\n%s", one.out)
	}
	byID := decode[[]nodeLog](t, e.ok("logs", job, "--node", strconv.FormatInt(all[0].ID, 10), "--json").out)
	if len(byID) != 1 || byID[0].ID != all[0].ID {
		t.Errorf("logs --node %d: %+v", all[0].ID, byID)
	}
	if r := e.fails("logs", job, "--node", "7"); r.code != 2 || !strings.Contains(r.err, "nodes 0..1") {
		t.Errorf("--node 7: exit %d, %s", r.code, r.err)
	}
}
