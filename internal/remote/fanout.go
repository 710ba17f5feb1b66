package remote

import (
	"context"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/shell"
)

// Result is one node's outcome of a fan-out.
type Result struct {
	Target   Target
	Exit     int // -1 when the command never reported a status
	Err      error
	Duration time.Duration
}

// OK reports whether the node ran the command and it exited 0.
func (r Result) OK() bool { return r.Err == nil && r.Exit == 0 }

// Job is what one node runs and where its output goes.
type Job struct {
	Target Target
	Cmd    string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Timeout bounds the node's connect and command; 0 means none.
	Timeout time.Duration
}

// RunAll runs every job with at most parallel nodes in flight (capped by
// the file-descriptor budget) and returns results in job order.
func (p *Pool) RunAll(ctx context.Context, jobs []Job, parallel int) []Result {
	if budget := FDBudget(); parallel <= 0 || parallel > budget {
		parallel = budget
	}
	results := make([]Result, len(jobs))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results[i] = Result{Target: j.Target, Exit: -1, Err: ctx.Err()}
				return
			}
			defer func() { <-sem }()
			start := time.Now()
			r := Result{Target: j.Target, Exit: -1}
			nctx := ctx
			if j.Timeout > 0 {
				var cancel context.CancelFunc
				nctx, cancel = context.WithTimeout(ctx, j.Timeout)
				defer cancel()
			}
			c, err := p.Connect(nctx, j.Target)
			if err == nil {
				r.Exit, r.Err = c.Run(nctx, j.Cmd, j.Stdin, j.Stdout, j.Stderr)
			} else {
				r.Err = err
			}
			r.Duration = time.Since(start)
			results[i] = r
		}()
	}
	wg.Wait()
	return results
}

// WithEnv prefixes cmd with exports of env, sorted by name. Servers refuse
// SSH "env" requests they were not told to accept (OpenSSH's AcceptEnv),
// so variables travel inside the command.
func WithEnv(env map[string]string, cmd string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		b.WriteString("export " + k + "=" + shell.Quote(env[k]) + "; ")
	}
	return b.String() + cmd
}

var fdOnce sync.Once
var fdBudget = 1024

// FDBudget raises the soft open-file limit to the hard limit (once) and
// returns how many connections may be open at once, leaving room for the
// process's other files. Each node needs one socket.
func FDBudget() int {
	fdOnce.Do(func() {
		if n, ok := raiseFileLimit(); ok {
			fdBudget = max(int(min(n, 1<<20))-128, 16)
		}
	})
	return fdBudget
}
