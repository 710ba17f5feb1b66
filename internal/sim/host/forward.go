package host

import (
	"io"
	"net"
	"strconv"
	"sync"

	gliderssh "github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"
)

// Forwards serves remote port forwards (ssh -R, x/crypto's Client.Listen):
// "tcpip-forward" opens a listener on the machine's loopback and carries
// each connection made to it back to the client as a "forwarded-tcpip"
// channel. Only loopback binds are allowed, as OpenSSH's default
// GatewayPorts=no.
//
// gliderlabs' own ForwardedTCPHandler keys listeners by address across
// every connection, so when a client reconnects and binds the same port,
// the old connection's cleanup can close the new listener. Here each
// listener belongs to the connection that asked for it.
type Forwards struct {
	mu  sync.Mutex
	lns map[*gossh.ServerConn]map[string]net.Listener
}

// Install adds the forwarding handlers to srv.
func (f *Forwards) Install(srv *gliderssh.Server) {
	srv.ReversePortForwardingCallback = func(_ gliderssh.Context, host string, _ uint32) bool {
		return isLoopback(host)
	}
	if srv.RequestHandlers == nil {
		srv.RequestHandlers = map[string]gliderssh.RequestHandler{}
	}
	srv.RequestHandlers["tcpip-forward"] = f.handle
	srv.RequestHandlers["cancel-tcpip-forward"] = f.handle
}

type forwardRequest struct {
	BindAddr string
	BindPort uint32
}

type forwardedChannel struct {
	DestAddr   string
	DestPort   uint32
	OriginAddr string
	OriginPort uint32
}

func (f *Forwards) handle(ctx gliderssh.Context, srv *gliderssh.Server, req *gossh.Request) (bool, []byte) {
	conn, ok := ctx.Value(gliderssh.ContextKeyConn).(*gossh.ServerConn)
	if !ok {
		return false, nil
	}
	if fk, ok := forcedCommand(ctx); ok && fk.restrict {
		return false, nil // the key is restricted: no forwarding
	}
	var r forwardRequest
	if err := gossh.Unmarshal(req.Payload, &r); err != nil {
		return false, nil
	}
	if req.Type == "cancel-tcpip-forward" {
		f.mu.Lock()
		ln := f.lns[conn][net.JoinHostPort(r.BindAddr, strconv.Itoa(int(r.BindPort)))]
		f.mu.Unlock()
		if ln == nil {
			return false, nil
		}
		ln.Close()
		return true, nil
	}
	if srv.ReversePortForwardingCallback == nil || !srv.ReversePortForwardingCallback(ctx, r.BindAddr, r.BindPort) {
		return false, []byte("port forwarding is refused")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(r.BindAddr, strconv.Itoa(int(r.BindPort))))
	if err != nil {
		return false, nil
	}
	port := ln.Addr().(*net.TCPAddr).Port
	// Keyed by the port asked for, as the client cancels with it.
	key := net.JoinHostPort(r.BindAddr, strconv.Itoa(int(r.BindPort)))
	f.mu.Lock()
	if f.lns == nil {
		f.lns = map[*gossh.ServerConn]map[string]net.Listener{}
	}
	first := f.lns[conn] == nil
	if first {
		f.lns[conn] = map[string]net.Listener{}
	}
	if old := f.lns[conn][key]; old != nil {
		old.Close()
	}
	f.lns[conn][key] = ln
	f.mu.Unlock()
	if first {
		go func() {
			<-ctx.Done() // the connection ended: its listeners go with it
			f.mu.Lock()
			lns := f.lns[conn]
			delete(f.lns, conn)
			f.mu.Unlock()
			for _, l := range lns {
				l.Close()
			}
		}()
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.carry(conn, c, r.BindAddr, port)
		}
	}()
	var reply []byte
	if r.BindPort == 0 {
		reply = gossh.Marshal(struct{ Port uint32 }{uint32(port)})
	}
	return true, reply
}

// carry pipes one accepted connection through a forwarded-tcpip channel.
func (f *Forwards) carry(conn *gossh.ServerConn, c net.Conn, bindAddr string, port int) {
	origin := c.RemoteAddr().(*net.TCPAddr)
	ch, reqs, err := conn.OpenChannel("forwarded-tcpip", gossh.Marshal(&forwardedChannel{
		DestAddr: bindAddr, DestPort: uint32(port),
		OriginAddr: origin.IP.String(), OriginPort: uint32(origin.Port),
	}))
	if err != nil {
		c.Close()
		return
	}
	go gossh.DiscardRequests(reqs)
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(ch, c)
		ch.CloseWrite()
		done <- struct{}{}
	}()
	go func() {
		io.Copy(c, ch)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
	ch.Close()
	c.Close()
}

// isLoopback reports whether a forward's host names this machine's
// loopback, the only place a simulated container may reach.
func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// directTCPIP serves a local forward (ssh -L, ssh -W) as sshd does: each
// direction closes on its own, so a client that ends its input still
// gets the server's answer. gliderlabs' handler closes both at once.
func directTCPIP(srv *gliderssh.Server, _ *gossh.ServerConn, newChan gossh.NewChannel, ctx gliderssh.Context) {
	var d forwardedChannel
	if err := gossh.Unmarshal(newChan.ExtraData(), &d); err != nil {
		newChan.Reject(gossh.ConnectionFailed, "parsing the forward: "+err.Error())
		return
	}
	if srv.LocalPortForwardingCallback == nil || !srv.LocalPortForwardingCallback(ctx, d.DestAddr, d.DestPort) {
		newChan.Reject(gossh.Prohibited, "forwards reach only the container's loopback")
		return
	}
	var dialer net.Dialer
	dconn, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(d.DestAddr, strconv.FormatUint(uint64(d.DestPort), 10)))
	if err != nil {
		newChan.Reject(gossh.ConnectionFailed, err.Error())
		return
	}
	ch, reqs, err := newChan.Accept()
	if err != nil {
		dconn.Close()
		return
	}
	go gossh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		io.Copy(ch, dconn)
		ch.CloseWrite()
	}()
	go func() {
		defer wg.Done()
		io.Copy(dconn, ch)
		if tc, ok := dconn.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	go func() {
		wg.Wait()
		ch.Close()
		dconn.Close()
	}()
}
