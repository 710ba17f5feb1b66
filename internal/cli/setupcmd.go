package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/remote"
)

// setupHashFile is where a node records the spec it was set up with, so
// an unchanged spec is not installed again.
const setupHashFile = "$HOME/.vastfleet/setup.sha256"

// setupHash names an ordered list of phases; the verification command is
// not part of it, so changing what is checked reinstalls nothing.
func setupHash(phases []string) string {
	h := sha256.New()
	io.WriteString(h, "vastfleet setup v1\x00")
	for _, p := range phases {
		io.WriteString(h, p+"\x00")
	}
	return hex.EncodeToString(h.Sum(nil))
}

type setupRow struct {
	Node         string `json:"node"`
	ID           int64  `json:"id"`
	Status       string `json:"status"` // installed, unchanged, failed
	PhasesRun    int    `json:"phases_run"`
	VerifyExit   *int   `json:"verify_exit,omitempty"`
	VerifyOutput string `json:"verify_output,omitempty"`
	Error        string `json:"error,omitempty"`
}

// setupOptions is what `setup` was asked, parsed.
type setupOptions struct {
	Nodes    nodeTargets
	Phases   []string
	Verify   string
	Force    bool
	Parallel int
	Timeout  time.Duration
	JSONFlags
}

func newSetupCmd(f *factory, runF func(context.Context, *setupOptions) error) *cobra.Command {
	opts := &setupOptions{}
	cmd := &cobra.Command{
		Use:   "setup (--fleet F | --all | ID...) --phase CMD [--phase CMD...] [--verify CMD]",
		Short: "Install an environment on every node in ordered phases, once per spec, and verify it",
		Long: `Runs each --phase in order on every node, one install per phase, so that a
later phase cannot move what an earlier one pinned, e.g.
  --phase 'pip install torch==2.4.0' --phase 'pip install -r requirements.txt'
A node that fails a phase runs no later phase. The SHA-256 of the phases is
recorded on each node (~/.vastfleet/setup.sha256) once they all pass (and
the verification, when given): a node holding the same hash is skipped, so
re-running an unchanged setup is cheap; --force installs again.
--verify runs last on every node, installed or skipped, and its output is
shown, e.g. --verify 'python -c "import torch; print(torch.cuda.is_available())"'.
Exit status: 0 when every node is set up, 3 when some failed, 1 when all did.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(opts.Phases) == 0 {
				return usagef("give at least one --phase")
			}
			opts.Nodes.IDs = args
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return setupRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	opts.Nodes.register(fl, "set up", false)
	fl.StringArrayVar(&opts.Phases, "phase", nil, "an install command; phases run in the order given")
	fl.StringVar(&opts.Verify, "verify", "", "a command run last on every node, its output shown")
	fl.BoolVar(&opts.Force, "force", false, "install even where the recorded spec is the same")
	fl.IntVar(&opts.Parallel, "parallel", 64, "nodes at once")
	fl.DurationVar(&opts.Timeout, "timeout", 0, "give up on a node's phase after D (0: no limit)")
	limitFlags(fl, bounds{"parallel", "1", "1024"}, bounds{"timeout", "0", "720h"})
	addJSONFlags(fl, &opts.JSONFlags, "print the result table as JSON")
	return cmd
}

func setupRun(ctx context.Context, f *factory, opts *setupOptions) error {
	nodes, p, err := opts.Nodes.resolve(ctx, f)
	if err != nil {
		return err
	}
	rows, err := setupNodes(ctx, f, p, nodes, opts.Phases, opts.Verify, opts.Force, opts.Parallel, opts.Timeout, opts.JSON)
	if err != nil {
		return err
	}
	return reportSetup(f, rows, opts.JSONFlags)
}

func setupNodes(ctx context.Context, f *factory, p provider.Provider, nodes []node, phases []string, verify string, force bool, parallel int, timeout time.Duration, quiet bool) ([]setupRow, error) {
	s, err := f.sshSession(ctx, p, parallel)
	if err != nil {
		return nil, err
	}
	known, err := s.key.hostKeys()
	if err != nil {
		return nil, err
	}
	hash := setupHash(phases)
	rows := make([]setupRow, len(nodes))
	for i, n := range nodes {
		rows[i] = setupRow{Node: n.Name, ID: n.ID}
	}
	var mu sync.Mutex
	// step runs cmd on the nodes at idx; each node's output is shown
	// prefixed with its name when show, and kept in capture when given.
	step := func(idx []int, cmd string, show bool, capture []bytes.Buffer) []remote.Result {
		sel := make([]node, len(idx))
		jobs := make([]remote.Job, len(idx))
		var writers []*prefixWriter
		for k, i := range idx {
			n := nodes[i]
			sel[k] = n
			var out io.Writer = io.Discard
			if show && !quiet {
				w := &prefixWriter{mu: &mu, out: f.io.Out, prefix: "[" + n.Name + "] "}
				writers = append(writers, w)
				out = w
			}
			if capture != nil {
				out = io.MultiWriter(out, &capture[i])
			}
			jobs[k] = remote.Job{Target: s.target(n, known), Cmd: remote.WithEnv(rankEnv(nodes, n), cmd), Timeout: timeout, Stdout: out, Stderr: out}
		}
		res := s.run(ctx, sel, jobs, parallel)
		for _, w := range writers {
			w.flush()
		}
		return res
	}
	fail := func(i int, what string, r remote.Result) {
		rows[i].Status = "failed"
		if r.Err != nil {
			rows[i].Error = what + ": " + r.Err.Error()
		} else {
			rows[i].Error = fmt.Sprintf("%s: exit %d", what, r.Exit)
		}
	}

	all := make([]int, len(nodes))
	for i := range all {
		all[i] = i
	}
	// Which nodes hold this spec already.
	recorded := make([]bytes.Buffer, len(nodes))
	var todo, ok []int
	for k, r := range step(all, "cat "+setupHashFile+" 2>/dev/null; true", false, recorded) {
		i := all[k]
		switch {
		case !r.OK():
			fail(i, "reaching the node", r)
		case !force && strings.TrimSpace(recorded[i].String()) == hash:
			rows[i].Status = "unchanged"
			ok = append(ok, i)
		default:
			todo = append(todo, i)
		}
	}
	for pi, phase := range phases {
		if len(todo) == 0 || ctx.Err() != nil {
			break
		}
		if !quiet {
			fmt.Fprintf(f.io.ErrOut, "phase %d/%d on %d nodes: %s\n", pi+1, len(phases), len(todo), phase)
		}
		var next []int
		for k, r := range step(todo, phase, true, nil) {
			i := todo[k]
			rows[i].PhasesRun++
			if !r.OK() {
				fail(i, fmt.Sprintf("phase %d", pi+1), r)
				continue
			}
			next = append(next, i)
		}
		todo = next
	}
	for _, i := range todo {
		rows[i].Status = "installed"
	}
	ok = append(ok, todo...)
	if verify != "" && len(ok) > 0 && ctx.Err() == nil {
		if !quiet {
			fmt.Fprintf(f.io.ErrOut, "verifying on %d nodes: %s\n", len(ok), verify)
		}
		outputs := make([]bytes.Buffer, len(nodes))
		var passed []int
		for k, r := range step(ok, verify, true, outputs) {
			i := ok[k]
			code := r.Exit
			rows[i].VerifyExit = &code
			rows[i].VerifyOutput = strings.TrimSpace(outputs[i].String())
			if !r.OK() {
				fail(i, "verify", r)
				continue
			}
			passed = append(passed, i)
		}
		ok = passed
	}
	// Record the spec where it was installed and passed: a node that
	// failed anywhere installs again next time.
	var record []int
	for _, i := range ok {
		if rows[i].Status == "installed" {
			record = append(record, i)
		}
	}
	if len(record) > 0 && ctx.Err() == nil {
		for k, r := range step(record, "mkdir -p \"$HOME/.vastfleet\" && echo "+hash+" > "+setupHashFile, false, nil) {
			if !r.OK() {
				fail(record[k], "recording the spec", r)
			}
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return rows, nil
}

func reportSetup(f *factory, rows []setupRow, js JSONFlags) error {
	return reportNodes(f, "setup", rows, js, func(r setupRow) bool { return r.Status == "failed" },
		[]string{"NODE", "ID", "STATUS", "PHASES RUN", "VERIFY", "ERROR"}, func(r setupRow) []string {
			v := "-"
			if r.VerifyExit != nil {
				v = "exit " + strconv.Itoa(*r.VerifyExit)
			}
			return []string{r.Node, strconv.FormatInt(r.ID, 10), r.Status, strconv.Itoa(r.PhasesRun), v, dash(r.Error)}
		})
}
