package host

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	gliderssh "github.com/gliderlabs/ssh"
	"github.com/pkg/sftp"

	"github.com/vastfleet/vastfleet/internal/procgroup"
)

// Banner is what vast's SSH gateway says before authentication.
const Banner = "Welcome to vast.ai. If authentication fails, try again after a few seconds, and double check your ssh key.\nHave fun!\n"

// serve runs the instance's SSH server on its listener.
func (mc *machine) serve(dropAfter int64, link Link) {
	srv := &gliderssh.Server{
		Handler:     mc.session,
		HostSigners: []gliderssh.Signer{mc.mgr.signer},
		Banner:      Banner,
		PublicKeyHandler: func(ctx gliderssh.Context, key gliderssh.PublicKey) bool {
			if mc.authorized(key) {
				return true
			}
			fk, ok := mc.fileAuthorized(key)
			if ok {
				ctx.SetValue(forcedKey{}, fk)
			}
			return ok
		},
		SubsystemHandlers: map[string]gliderssh.SubsystemHandler{"sftp": mc.sftp},
	}
	// Remote forwards (ssh -R): vastfleet's reverse tunnel to a
	// coordinator on the user's machine binds the node's loopback.
	(&Forwards{}).Install(srv)
	// Local forwards (ssh -L), the usual way to Jupyter or TensorBoard on
	// vast: only to the container's own loopback, so nothing the
	// simulator derives points off this machine.
	srv.ChannelHandlers = map[string]gliderssh.ChannelHandler{
		"session":      gliderssh.DefaultSessionHandler,
		"direct-tcpip": directTCPIP,
	}
	srv.LocalPortForwardingCallback = func(ctx gliderssh.Context, host string, _ uint32) bool {
		if fk, ok := forcedCommand(ctx); ok && fk.restrict {
			return false
		}
		return isLoopback(host)
	}
	paced := newPacers(link)
	srv.ConnCallback = func(_ gliderssh.Context, c net.Conn) net.Conn {
		if paced.down != nil || paced.up != nil {
			c = &pacedConn{Conn: c, p: paced}
		}
		if dropAfter > 0 {
			c = &dropConn{Conn: c, left: dropAfter}
		}
		return c
	}
	mc.srv = srv
	for _, ln := range mc.lns {
		go srv.Serve(ln)
	}
}

// dropConn closes the connection once it has carried its byte allowance.
type dropConn struct {
	net.Conn
	left int64
}

func (c *dropConn) count(n int) {
	if atomic.AddInt64(&c.left, -int64(n)) <= 0 {
		c.Conn.Close()
	}
}

func (c *dropConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.count(n)
	return n, err
}

func (c *dropConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.count(n)
	return n, err
}

var signals = map[gliderssh.Signal]syscall.Signal{
	gliderssh.SIGABRT: syscall.SIGABRT, gliderssh.SIGALRM: syscall.SIGALRM, gliderssh.SIGFPE: syscall.SIGFPE,
	gliderssh.SIGHUP: syscall.SIGHUP, gliderssh.SIGILL: syscall.SIGILL, gliderssh.SIGINT: syscall.SIGINT,
	gliderssh.SIGKILL: syscall.SIGKILL, gliderssh.SIGPIPE: syscall.SIGPIPE, gliderssh.SIGQUIT: syscall.SIGQUIT,
	gliderssh.SIGSEGV: syscall.SIGSEGV, gliderssh.SIGTERM: syscall.SIGTERM, gliderssh.SIGUSR1: procgroup.SIGUSR1,
	gliderssh.SIGUSR2: procgroup.SIGUSR2,
}

// session runs one exec or shell request with the container's shell in
// the instance directory, in a process group of its own. As on vast, its
// output goes to the client only: the container log holds the image's
// and onstart's output, not what SSH sessions print.
func (mc *machine) session(s gliderssh.Session) {
	if s.User() == CopyUser {
		mc.rsyncd(s)
		return
	}
	raw := s.RawCommand()
	var forcedEnv []string
	if fk, ok := forcedCommand(s.Context()); ok {
		if _, _, pty := s.Pty(); fk.restrict && pty {
			fmt.Fprintln(s.Stderr(), "PTY allocation request failed: the key is restricted")
			s.Exit(255)
			return
		}
		if fk.command != "" {
			// As sshd: the key's command runs whatever the client asked.
			raw, forcedEnv = fk.command, []string{"SSH_ORIGINAL_COMMAND=" + raw}
		}
	}
	var cmd *exec.Cmd
	if raw != "" {
		cmd = exec.Command(Shell, "-c", raw)
	} else {
		cmd = exec.Command(Shell, "-i")
	}
	cmd.Dir = mc.dir
	cmd.Env = append(append(append(append([]string{}, mc.sessionEnv...), s.Environ()...), mc.marker), forcedEnv...)

	ptyReq, winCh, isPty := s.Pty()
	var ptmx *os.File
	drained := make(chan struct{}) // the terminal's output is all sent
	if isPty {
		cmd.Env = append(cmd.Env, "TERM="+ptyReq.Term)
		p, tty, err := pty.Open()
		if err != nil {
			fmt.Fprintf(s.Stderr(), "pty: %v\n", err)
			s.Exit(255)
			return
		}
		pty.Setsize(p, &pty.Winsize{Rows: uint16(ptyReq.Window.Height), Cols: uint16(ptyReq.Window.Width)})
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		procgroup.WithTTY(cmd)
		ptmx = p
		err = mc.start(cmd)
		tty.Close()
		if err != nil {
			p.Close()
			fmt.Fprintf(s.Stderr(), "%v\n", err)
			s.Exit(255)
			return
		}
		// Window changes until the session ends; the terminal closes only
		// after this goroutine is done with it.
		stopWin, winDone := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(winDone)
			for {
				select {
				case w, ok := <-winCh:
					if !ok {
						return
					}
					pty.Setsize(ptmx, &pty.Winsize{Rows: uint16(w.Height), Cols: uint16(w.Width)})
				case <-stopWin:
					return
				}
			}
		}()
		defer func() {
			close(stopWin)
			<-winDone
			ptmx.Close()
		}()
		go io.Copy(ptmx, s)
		go func() {
			// Ends with EIO once every holder of the terminal is gone.
			io.Copy(s, ptmx)
			close(drained)
		}()
	} else {
		cmd.Stdout = s
		cmd.Stderr = s.Stderr()
		if !mc.startPiped(s, cmd) {
			return
		}
	}
	pgid := cmd.Process.Pid
	defer mc.forget(pgid)

	sigs := make(chan gliderssh.Signal, 4)
	s.Signals(sigs)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case sig := <-sigs:
				if n, ok := signals[sig]; ok {
					procgroup.Kill(pgid, n)
				}
			case <-s.Context().Done():
				// The client went away: hang up on the session, as sshd does.
				procgroup.Kill(pgid, syscall.SIGHUP)
				return
			case <-done:
				return
			}
		}
	}()

	err := cmd.Wait()
	if isPty {
		// What the command wrote last may still sit in the terminal; a
		// background process that keeps the terminal open is not waited
		// for long.
		select {
		case <-drained:
		case <-time.After(2 * time.Second):
		}
	}
	s.Exit(exitCode(err))
}

// exitCode is the status an SSH client reports for a finished command.
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
	return 255
}

// sftp serves the SFTP subsystem, relative paths from the instance
// directory.
func (mc *machine) sftp(s gliderssh.Session) {
	if fk, ok := forcedCommand(s.Context()); ok && fk.command != "" {
		// sshd runs the key's command instead of any subsystem.
		mc.session(s)
		return
	}
	srv, err := sftp.NewServer(s, sftp.WithServerWorkingDirectory(mc.dir))
	if err != nil {
		fmt.Fprintf(s.Stderr(), "sftp: %v\n", err)
		return
	}
	// Serve leaves the channel open on a clean end, so the exit status
	// below still reaches the client; sshd's sftp-server exits 0 when the client ends the session; scp
	// (SFTP mode since OpenSSH 9) reports a channel without a status as a
	// failure even though the file arrived.
	if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
		mc.mgr.log.Debug("sim host: sftp session", "id", mc.id, "err", err)
		s.Exit(1)
		return
	}
	s.Exit(0)
}

// startPiped starts cmd, without a terminal, in its own process group
// on the machine, with s as its input through a pipe copied here: exec's
// own stdin copier would keep Wait blocked on a client that never closes
// its input. On failure it ends the session and says false.
func (mc *machine) startPiped(s gliderssh.Session, cmd *exec.Cmd) bool {
	procgroup.Own(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		s.Exit(255)
		return false
	}
	if err := mc.start(cmd); err != nil {
		fmt.Fprintf(s.Stderr(), "%v\n", err)
		s.Exit(255)
		return false
	}
	go func() {
		io.Copy(stdin, s)
		stdin.Close()
	}()
	return true
}
