package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/httpserver"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// OpenSpec opens the server's database as --db names it: PostgreSQL for
// a postgres:// URL, else SQLite at sqlite:PATH, or at dataDir's serve.db
// for "".
func OpenSpec(ctx context.Context, spec string, dataDir func() (string, error)) (*DB, error) {
	if strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://") {
		return OpenPostgres(ctx, spec, clock.Wall{})
	}
	var path string
	switch {
	case spec == "":
		dir, err := dataDir()
		if err != nil {
			return nil, err
		}
		path = filepath.Join(dir, "serve.db")
	case strings.HasPrefix(spec, "sqlite:"):
		path = strings.TrimPrefix(spec, "sqlite:")
	default:
		return nil, usage.Errorf("--db %q: want sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DB", redactDSN(spec))
	}
	return OpenDB(ctx, path, clock.Wall{})
}

// redactDSN hides a password in a database URL.
func redactDSN(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

// ReplicatedDBs are the data dir's databases a replica keeps: the store,
// the coordinators' database and, unless it lives in PostgreSQL or outside
// the data dir (dbSpec, as OpenSpec takes it), the server's own.
// replicating: a replica is kept or restored from.
func ReplicatedDBs(dbSpec string, replicating bool) ([]string, error) {
	dbs := []string{"state.db", "coord.db"}
	if !replicating {
		return dbs, nil
	}
	switch {
	case dbSpec == "":
		dbs = append(dbs, "serve.db")
	case strings.HasPrefix(dbSpec, "sqlite:"):
		return nil, usage.Errorf("--db %s with --replicate or --restore-from: the replica keeps the data dir's databases; leave --db out, or use PostgreSQL for the server's own", dbSpec)
	}
	return dbs, nil
}

// CheckAddr refuses an address that is not HOST:PORT, or that other
// machines reach without TLS.
func CheckAddr(addr string, secure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usage.Errorf("--addr %q: want HOST:PORT", addr)
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && !secure {
		return usage.Errorf("--addr %s is reachable from other machines: add --tls, so that tokens are encrypted", addr)
	}
	return nil
}

// Listen listens on addr (its error says serve:), with TLS when cert is set (cert gives the
// certificate and its sha256 pin), and returns the scheme clients use.
func Listen(addr string, cert func() (tls.Certificate, string, error)) (ln net.Listener, scheme, pin string, err error) {
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		return nil, "", "", fmt.Errorf("serve: %w", err)
	}
	if cert == nil {
		return ln, "http", "", nil
	}
	c, pin, err := cert()
	if err != nil {
		ln.Close()
		return nil, "", "", err
	}
	ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12})
	return ln, "https", pin, nil
}

// ServeUntil serves the API on ln until ctx ends (then shuts down within
// 5 seconds) or serving fails.
func (s *Server) ServeUntil(ctx context.Context, ln net.Listener) error {
	// Bundles may be large: a whole request may take 10 minutes to arrive.
	hs := httpserver.New(s.Handler(), httpserver.Timeouts{Read: 10 * time.Minute})
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	return nil
}

// CommandArgs are the arguments the server runs a client's command with:
// a copy of args, an up also given the server's agent binary and, unless
// it resumes, its coordinators' address (serve --agent-bin, --coord-addr;
// "" for none).
func CommandArgs(args []string, agentBin, coordAddr string) []string {
	args = slices.Clone(args)
	if len(args) == 0 || args[0] != "up" {
		return args
	}
	if agentBin != "" {
		args = append(args, "--agent-bin", agentBin)
	}
	if coordAddr != "" && !slices.Contains(args, "--resume") {
		args = append(args, "--coord-addr", coordAddr)
	}
	return args
}
