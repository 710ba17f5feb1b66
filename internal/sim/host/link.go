package host

import (
	"context"
	"net"

	"golang.org/x/time/rate"
)

// Link is a machine's network link as its offer lists it (inet_down,
// inet_up, in Mb/s). The machine's SSH connections share it: what a client
// sends in (a sync, an upload, a forwarded download) is paced at the
// downlink, and what the machine sends out (command output, a collect, an
// scp from it) at the uplink. Zero leaves that direction unpaced.
//
// Only SSH traffic through the machine's own server is paced: an ssh the
// container itself runs to another machine is paced at that machine's
// downlink, not at this one's uplink, and the container's other sockets
// (a curl to the coordinator) not at all.
type Link struct {
	DownMbps, UpMbps float64
}

// linkBurst bounds the bytes a paced direction sends at once: 64 KiB, a
// few SSH packets, so a 10 Mb/s link is smooth at 50 ms.
const linkBurst = 64 << 10

// pacers are one machine's two directions, shared by its connections.
type pacers struct{ down, up *rate.Limiter }

func newPacers(l Link) *pacers {
	mk := func(mbps float64) *rate.Limiter {
		if mbps <= 0 {
			return nil
		}
		return rate.NewLimiter(rate.Limit(mbps*1e6/8), linkBurst)
	}
	return &pacers{down: mk(l.DownMbps), up: mk(l.UpMbps)}
}

// pacedConn is one SSH connection to the machine, paced by its link.
type pacedConn struct {
	net.Conn
	p *pacers
}

func (c *pacedConn) Read(b []byte) (int, error) {
	if c.p.down != nil && len(b) > linkBurst {
		b = b[:linkBurst]
	}
	n, err := c.Conn.Read(b)
	if n > 0 && c.p.down != nil {
		// Received bytes are paid for before the server reads more: the
		// sender's window fills and it slows to the link's rate.
		c.p.down.WaitN(context.Background(), n)
	}
	return n, err
}

func (c *pacedConn) Write(b []byte) (int, error) {
	if c.p.up == nil {
		return c.Conn.Write(b)
	}
	sent := 0
	for sent < len(b) {
		k := min(len(b)-sent, linkBurst)
		c.p.up.WaitN(context.Background(), k)
		n, err := c.Conn.Write(b[sent : sent+k])
		sent += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}
