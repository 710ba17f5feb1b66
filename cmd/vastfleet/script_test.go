package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// agentBuilt is the agent binary, linked once per test binary into
// builtDir (removed by TestMain).
var agentBuilt = sync.OnceValues(func() (string, error) {
	bin, err := built()
	if err != nil {
		return "", err
	}
	agent := filepath.Join(filepath.Dir(bin), "vastfleet-agent")
	cmd := exec.Command("go", "build", "-o", agent, "../vastfleet-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build vastfleet-agent: %v\n%s", err, out)
	}
	return agent, nil
})

// TestScripts runs the scenarios in testdata/script: each reads as the
// commands a user types, against the built-in simulator, in a data dir of
// its own.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(env *testscript.Env) error {
			env.Setenv("VASTFLEET_HOME", filepath.Join(env.WorkDir, "home"))
			env.Defer(func() { stopMarket(filepath.Join(env.WorkDir, "home")) })
			// The agent the simulated nodes run, linked once per test
			// binary (a job's onstart downloads it from the coordinator).
			agent, err := agentBuilt()
			if err != nil {
				return err
			}
			env.Setenv("AGENT", agent)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// stdout2env NAME sets $NAME to the last command's stdout,
			// trimmed: an id one command prints and the next one takes.
			"stdout2env": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: stdout2env NAME")
				}
				ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile("stdout")))
			},
		},
	})
}
