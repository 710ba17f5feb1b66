package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Forward asks the node to listen on addr (HOST:PORT as the node sees it,
// normally its loopback; port 0 lets the node pick) and carries every
// connection made there to one that dial opens on this side: a remote
// port forward, as ssh -R. up, when set, is told the address the node
// bound. It returns ctx.Err() once ctx ends, or an error when the node
// refused the forward or the connection under it closed.
func (c *Conn) Forward(ctx context.Context, addr string, dial func(context.Context) (net.Conn, error), up func(bound net.Addr)) error {
	ln, err := c.client.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("ssh %s: the node refused to listen on %s for the tunnel: %w", c.target.Name, addr, err)
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	if up != nil {
		up(ln.Addr())
	}
	for {
		rc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				err = errors.New("the SSH connection closed")
			}
			return fmt.Errorf("ssh %s: tunnel on %s: %w", c.target.Name, addr, err)
		}
		go carry(ctx, rc, dial)
	}
}

// carry pipes one forwarded connection to a fresh local one, both ways,
// half-closing each direction as it ends so request/response protocols
// see their EOFs.
func carry(ctx context.Context, rc net.Conn, dial func(context.Context) (net.Conn, error)) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	lc, err := dial(dctx)
	cancel()
	if err != nil {
		rc.Close()
		return
	}
	stop := context.AfterFunc(ctx, func() { rc.Close(); lc.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(lc, rc)
		closeWrite(lc)
		done <- struct{}{}
	}()
	go func() {
		io.Copy(rc, lc)
		closeWrite(rc)
		done <- struct{}{}
	}()
	<-done
	<-done
	rc.Close()
	lc.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// Tunnel is a remote forward kept up on one node by KeepForward.
type Tunnel struct {
	Target Target
	// RemoteAddr is where the node listens, e.g. 127.0.0.1:20017.
	RemoteAddr string
	// Dial opens the local end of each forwarded connection (the
	// coordinator's address on this machine).
	Dial func(ctx context.Context) (net.Conn, error)
	// OnUp and OnDown, when set, are told each time the tunnel comes up
	// (with the address the node bound) and goes down (with why), for logs.
	OnUp   func(bound net.Addr)
	OnDown func(err error)
	// MaxBackoff caps the wait between reconnects [1 min]; the first wait
	// is the pool's RetryBackoff, doubling after each failed try.
	MaxBackoff time.Duration
}

// KeepForward keeps t up until ctx ends: it connects through the pool,
// forwards, and when the node refuses or the connection drops (a network
// cut, a restarted sshd, keepalives unanswered) it connects again with
// backoff. The wait starts again from the shortest once the tunnel has
// come up. It returns ctx.Err().
func (p *Pool) KeepForward(ctx context.Context, t Tunnel) error {
	maxWait := t.MaxBackoff
	if maxWait <= 0 {
		maxWait = time.Minute
	}
	wait := p.opts.RetryBackoff
	for {
		wasUp := false
		c, err := p.Connect(ctx, t.Target)
		if err == nil {
			err = c.Forward(ctx, t.RemoteAddr, t.Dial, func(bound net.Addr) {
				wasUp = true
				if t.OnUp != nil {
					t.OnUp(bound)
				}
			})
			if ctx.Err() == nil && c.closed() {
				// Connect must dial again, not hand back the dead client.
				p.drop(c)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if t.OnDown != nil {
			t.OnDown(err)
		}
		if wasUp {
			wait = p.opts.RetryBackoff
		}
		if err := wall.Sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, maxWait)
	}
}
