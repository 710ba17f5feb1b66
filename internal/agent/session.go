package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/vastfleet/vastfleet/internal/procgroup"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Restart policies of a session.
const (
	restartOnFailure = "on-failure"
	restartAlways    = "always"
	restartNever     = "never"
)

// Session states as the heartbeat reports them.
const (
	stateStarting = "starting"
	stateRunning  = "running"
	stateExited   = "exited"
	stateFailed   = "failed"
	stateBackoff  = "backoff"
	stateWaiting  = "waiting" // for its After file
)

// waitAfter holds the session until its After file exists; false when
// ctx ended first.
func (s *session) waitAfter(ctx context.Context) bool {
	if s.spec.After == "" {
		return true
	}
	path := s.spec.After
	if !filepath.IsAbs(path) {
		home, err := os.UserHomeDir()
		if err != nil {
			home = "."
		}
		path = filepath.Join(home, path)
	}
	s.set(func(st *wire.SessionState) { st.Name, st.State = s.spec.Name, stateWaiting })
	for {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return false
		}
	}
}

// maxParsedLine is the longest stdout line read as a metric or a finding;
// longer lines still reach the log. It keeps one finding well inside the
// coordinator's body limit.
const maxParsedLine = 64 << 10

// session supervises one named command: /bin/sh -c in its own process
// group, restarted by its policy with capped exponential backoff, its
// output appended to its log, its structured stdout lines handed to onLine.
type session struct {
	spec   wire.Session
	out    io.Writer // the session's log
	onLine func(session string, l wire.Line)
	// items, for an item worker (spec.IsItemWorker), leases items and
	// takes their results; the session then runs once per item.
	items itemSource
	env   []string
	grace time.Duration
	base  time.Duration
	log   *slog.Logger

	mu    sync.Mutex
	state wire.SessionState
}

func (s *session) snapshot() wire.SessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state
	if st.ExitCode != nil {
		c := *st.ExitCode
		st.ExitCode = &c
	}
	return st
}

func (s *session) set(f func(st *wire.SessionState)) {
	s.mu.Lock()
	f(&s.state)
	s.mu.Unlock()
}

// run supervises the session until ctx ends (then the child is stopped:
// SIGINT to its group, SIGKILL after the grace) or the policy says done.
func (s *session) run(ctx context.Context) {
	if !s.waitAfter(ctx) {
		return
	}
	if s.spec.IsItemWorker() && s.items != nil {
		s.runItems(ctx)
		return
	}
	policy := s.spec.Restart
	if policy == "" {
		policy = restartOnFailure
	}
	backoff := s.base
	for {
		s.set(func(st *wire.SessionState) { st.Name, st.State, st.PID = s.spec.Name, stateStarting, 0 })
		began := time.Now()
		code, err := s.once(ctx, runSpec{command: s.spec.Command, env: s.env,
			onLine: func(l wire.Line) { s.onLine(s.spec.Name, l) }})
		failed := err != nil || code != 0
		s.set(func(st *wire.SessionState) {
			st.PID = 0
			st.State = stateExited
			if failed {
				st.State = stateFailed
			}
			if err == nil || code >= 0 {
				c := code
				st.ExitCode = &c
			}
		})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.log.Warn("session could not start", "session", s.spec.Name, "err", err)
		}
		if policy == restartNever || (policy == restartOnFailure && !failed) {
			return
		}
		// A run that lasted a while was healthy: start over from the
		// shortest backoff rather than punishing a rare crash.
		if time.Since(began) > maxRestartBackoff {
			backoff = s.base
		}
		s.set(func(st *wire.SessionState) { st.State = stateBackoff })
		fmt.Fprintf(s.out, "[vastfleet] session %s ended (exit %d); restarting in %s\n", s.spec.Name, code, backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxRestartBackoff)
		s.set(func(st *wire.SessionState) { st.Restarts++ })
	}
}

// runSpec is one run of a session's command.
type runSpec struct {
	command string
	env     []string
	dir     string    // working directory; "" is the agent's
	tail    io.Writer // also gets stdout, when set
	onLine  func(wire.Line)
}

// once runs the command to its end, or until ctx ends and it is stopped.
// code is the exit status, 128+N for a signal N, -1 when it never ran.
func (s *session) once(ctx context.Context, run runSpec) (code int, err error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return -1, err
	}
	cmd := exec.Command("/bin/sh", "-c", run.command)
	cmd.Env = run.env
	cmd.Dir = run.dir
	cmd.Stdout, cmd.Stderr = outW, errW
	// Its own group, so that a stop reaches every process it started.
	procgroup.Own(cmd)
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		fmt.Fprintf(s.out, "[vastfleet] session %s: %v\n", s.spec.Name, err)
		return -1, err
	}
	pid := cmd.Process.Pid
	s.set(func(st *wire.SessionState) { st.State, st.PID = stateRunning, pid })

	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); s.copyLines(outR, run.tail, run.onLine) }()
	go func() { defer readers.Done(); s.copyLines(errR, nil, nil) }()

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-waited:
	case <-ctx.Done():
		_ = procgroup.Kill(pid, syscall.SIGINT)
		t := time.NewTimer(s.grace)
		select {
		case werr = <-waited:
			t.Stop()
		case <-t.C:
			fmt.Fprintf(s.out, "[vastfleet] session %s ignored SIGINT for %s: killing it\n", s.spec.Name, s.grace)
			_ = procgroup.Kill(pid, syscall.SIGKILL)
			werr = <-waited
		}
	}
	// What the command left behind in its group ends with it, so that a
	// restart never runs next to a previous run's children.
	_ = procgroup.Kill(pid, syscall.SIGKILL)

	// The readers end when every writer has gone; a process that left the
	// group could hold a pipe open forever, so stop waiting after a while.
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		outR.Close()
		errR.Close()
		<-done
	}
	outR.Close()
	errR.Close()
	return exitCode(werr), nil
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// copyLines appends r to the session's log (and to tail) line by line
// and hands every structured line to onLine, when set (stdout).
func (s *session) copyLines(r io.Reader, tail io.Writer, onLine func(wire.Line)) {
	br := bufio.NewReaderSize(r, maxParsedLine)
	long := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			complete := err == nil || err == io.EOF
			if err == io.EOF {
				chunk = append(chunk[:len(chunk):len(chunk)], '\n') // the last line, unterminated
			}
			_, _ = s.out.Write(chunk)
			if tail != nil {
				_, _ = tail.Write(chunk)
			}
			if onLine != nil && complete && !long {
				if l, ok := wire.ParseLine(bytes.TrimSpace(chunk)); ok {
					onLine(l)
				}
			}
		}
		long = errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !long {
			return
		}
	}
}

// sessionEnv is the agent's environment without the fleet's agent token:
// the session's code has no business posting as the agent.
func sessionEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if len(kv) > len(wire.EnvToken) && kv[:len(wire.EnvToken)+1] == wire.EnvToken+"=" {
			continue
		}
		out = append(out, kv)
	}
	return out
}
