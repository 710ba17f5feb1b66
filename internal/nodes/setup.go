package nodes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

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

// SetupRow is what setup did on one node.
type SetupRow struct {
	Node         string `json:"node"`
	ID           int64  `json:"id"`
	Status       string `json:"status"` // installed, unchanged, failed
	PhasesRun    int    `json:"phases_run"`
	VerifyExit   *int   `json:"verify_exit,omitempty"`
	VerifyOutput string `json:"verify_output,omitempty"`
	Error        string `json:"error,omitempty"`
}

// SetupOptions is an ordered list of install phases and a check.
type SetupOptions struct {
	Phases   []string
	Verify   string
	Force    bool // install even where the spec is recorded
	Parallel int
	Timeout  time.Duration
	Quiet    bool
}

// Setup installs the phases, in order, on every node that does not hold
// them already, stopping a node at its first failure; then verifies, and
// records the spec where it was installed and passed.
func (o *Ops) Setup(ctx context.Context, nodes []Node, opts SetupOptions) ([]SetupRow, error) {
	known, err := o.key.HostKeys()
	if err != nil {
		return nil, err
	}
	hash := setupHash(opts.Phases)
	rows := make([]SetupRow, len(nodes))
	for i, n := range nodes {
		rows[i] = SetupRow{Node: n.Name, ID: n.ID}
	}
	var mu sync.Mutex
	// step runs cmd on the nodes at idx; each node's output is shown
	// prefixed with its name when show, and kept in capture when given.
	step := func(idx []int, cmd string, show bool, capture []bytes.Buffer) []remote.Result {
		sel := make([]Node, len(idx))
		jobs := make([]remote.Job, len(idx))
		cmds := RankCommands(nodes, cmd)
		var writers []*prefixWriter
		for k, i := range idx {
			n := nodes[i]
			sel[k] = n
			var out io.Writer = io.Discard
			if show && !opts.Quiet {
				w := &prefixWriter{mu: &mu, out: o.cfg.Out, prefix: "[" + n.Name + "] "}
				writers = append(writers, w)
				out = w
			}
			if capture != nil {
				out = io.MultiWriter(out, &capture[i])
			}
			jobs[k] = remote.Job{Target: o.Target(n, known), Cmd: cmds[i], Timeout: opts.Timeout, Stdout: out, Stderr: out}
		}
		res := o.Run(ctx, sel, jobs, opts.Parallel)
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
	note := func(format string, args ...any) {
		if !opts.Quiet {
			fmt.Fprintf(o.cfg.ErrOut, format, args...)
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
		case !opts.Force && strings.TrimSpace(recorded[i].String()) == hash:
			rows[i].Status = "unchanged"
			ok = append(ok, i)
		default:
			todo = append(todo, i)
		}
	}
	for pi, phase := range opts.Phases {
		if len(todo) == 0 || ctx.Err() != nil {
			break
		}
		note("phase %d/%d on %d nodes: %s\n", pi+1, len(opts.Phases), len(todo), phase)
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
	if opts.Verify != "" && len(ok) > 0 && ctx.Err() == nil {
		note("verifying on %d nodes: %s\n", len(ok), opts.Verify)
		outputs := make([]bytes.Buffer, len(nodes))
		var passed []int
		for k, r := range step(ok, opts.Verify, true, outputs) {
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
