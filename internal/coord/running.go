package coord

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/httpserver"
	"github.com/vastfleet/vastfleet/internal/usage"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// InfoFile, in the data dir, says where the running coordinator listens,
// for `launch --coord auto`.
const InfoFile = "coord.json"

// Info is InfoFile's content.
type Info struct {
	URL         string `json:"url"`
	Fingerprint string `json:"fingerprint,omitempty"`
	PID         int    `json:"pid"`
	// TunnelBase > 0: the coordinator keeps reverse tunnels, and agents
	// reach it on their node's 127.0.0.1:bootstrap.TunnelPort(base, id).
	TunnelBase int `json:"tunnel_base,omitempty"`
}

// ReadInfo is the running coordinator of the data dir dir, for --coord auto.
func ReadInfo(dir string) (Info, error) {
	var ci Info
	b, err := os.ReadFile(filepath.Join(dir, InfoFile))
	if errors.Is(err, os.ErrNotExist) {
		return ci, usage.Errorf("--coord auto: no coordinator is running for this data dir; start one with `vastfleet coord` in another terminal")
	}
	if err != nil {
		return ci, err
	}
	if err := json.Unmarshal(b, &ci); err != nil {
		return ci, fmt.Errorf("%s: %w", InfoFile, err)
	}
	return ci, nil
}

// CheckListen refuses a dead-man policy other than stop or destroy, and an
// address other machines reach without TLS; it reports whether addr is on
// loopback.
func CheckListen(addr string, secure bool, policy string) (loopback bool, err error) {
	if policy != wire.PolicyStop && policy != wire.PolicyDestroy {
		return false, usage.Errorf("--orphan-policy %q: use stop or destroy", policy)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, usage.Errorf("--addr %q: want HOST:PORT (%v)", addr, err)
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && !secure {
		return false, usage.Errorf("--addr %s is reachable from other machines: add --tls, so that tokens and findings are encrypted", addr)
	}
	return host == "localhost" || net.ParseIP(host).IsLoopback(), nil
}

// Listen is where and how a coordinator serves.
type Listen struct {
	Addr string
	// Dir is the data dir: the coordinator's database, certificate and
	// InfoFile live there.
	Dir string
	TLS bool
	// TunnelBase > 0 tells launches that agents reach it through reverse
	// tunnels.
	TunnelBase int
}

// Running is a coordinator serving in this process: `vastfleet coord`
// and `vastfleet up` both run one.
type Running struct {
	URL         string
	Fingerprint string
	DB          *DB
	Srv         *Server
	Addr        net.Addr
	// Served ends with the HTTP server's error, if it stops by itself.
	Served chan error
	close  func()
}

// Close stops serving, forgets the coordinator's address in the data dir
// and closes its database.
func (c *Running) Close() { c.close() }

// Start opens the data dir's coordinator database, starts a coordinator
// with cfg (its DB set here) on l.Addr and records where it listens in
// l.Dir (InfoFile), for `launch --coord auto`.
func Start(ctx context.Context, l Listen, cfg Config) (*Running, error) {
	db, err := OpenDB(ctx, filepath.Join(l.Dir, "coord.db"))
	if err != nil {
		return nil, err
	}
	cfg.DB, cfg.Secure = db, l.TLS
	srv, err := New(cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	fail := func(err error) (*Running, error) {
		srv.Close()
		db.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return fail(fmt.Errorf("coordinator: %w (another coordinator on this port? pick one with --addr)", err))
	}
	addr := ln.Addr()
	scheme, fingerprint := "http", ""
	if l.TLS {
		cert, fp, err := SelfSigned(filepath.Join(l.Dir, "coord-tls"))
		if err != nil {
			ln.Close()
			return fail(err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		scheme, fingerprint = "https", fp
	}
	url := scheme + "://" + addr.String()
	info, _ := json.Marshal(Info{URL: url, Fingerprint: fingerprint, PID: os.Getpid(), TunnelBase: l.TunnelBase})
	infoPath := filepath.Join(l.Dir, InfoFile)
	if err := atomicfile.WriteFile(infoPath, info, 0o600); err != nil {
		ln.Close()
		return fail(err)
	}
	hs := srv.HTTPServer(httpserver.Timeouts{})
	c := &Running{URL: url, Fingerprint: fingerprint, DB: db, Srv: srv, Addr: addr, Served: make(chan error, 1)}
	go func() { c.Served <- hs.Serve(ln) }()
	c.close = func() {
		os.Remove(infoPath)
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
		srv.Close()
		db.Close()
	}
	return c, nil
}

// DashboardLinks are the fleets' dashboard links, name and link, in the
// order given; on an error, those made before it.
func (c *Running) DashboardLinks(ctx context.Context, fleets []string) ([][2]string, error) {
	var out [][2]string
	for _, name := range fleets {
		_, viewer, err := c.DB.FleetTokens(ctx, name)
		if err != nil {
			return out, err
		}
		out = append(out, [2]string{name, DashboardURL(c.URL, viewer)})
	}
	return out, nil
}
