package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"golang.org/x/crypto/ssh"
)

// Handshake tells whether an SSH server answers at host:port: it dials
// and completes the SSH handshake (version exchange and key exchange)
// within timeout, offering no key, so nothing is authenticated and no
// secret leaves this machine. The server refusing the (absent) key is the
// answer expected: the handshake finished. A port that accepts TCP and
// then says nothing fails with ErrHandshakeHang; a refused port or a
// connection closed during the exchange with ErrRefused.
func Handshake(ctx context.Context, host string, port int, timeout time.Duration) error {
	t := Target{Host: host, Port: port}
	fail := func(kind error, detail string, err error) error {
		return &Error{Target: t, Kind: kind, Detail: detail, Err: err}
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(hctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case hctx.Err() != nil:
			return fail(ErrHandshakeHang, fmt.Sprintf("no TCP connection within %s", timeout), err)
		}
		return fail(ErrRefused, "the port does not accept connections", err)
	}
	defer nc.Close()
	stop := context.AfterFunc(hctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	cfg := &ssh.ClientConfig{User: "root", HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: timeout}
	sc, _, _, err := ssh.NewClientConn(nc, t.addr(), cfg)
	if err == nil {
		sc.Close() // a server that lets anyone in: it answered all the same
		return nil
	}
	var ne net.Error
	switch {
	case isAuthFailure(err):
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case hctx.Err() != nil || errors.As(err, &ne) && ne.Timeout():
		return fail(ErrHandshakeHang, fmt.Sprintf("the host accepted the connection but the SSH handshake did not finish within %s", timeout), err)
	}
	return fail(ErrRefused, "the SSH handshake failed", err)
}
