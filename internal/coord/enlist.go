package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/bootstrap"
	"github.com/vastfleet/vastfleet/internal/certpin"
	"github.com/vastfleet/vastfleet/internal/usage"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Resolve is the coordinator a launch's --coord names: the data dir's
// running one (InfoFile) for "auto", else target with its pin.
func Resolve(dir, target, fingerprint string) (Info, error) {
	if target == "auto" {
		return ReadInfo(dir)
	}
	return Info{URL: target, Fingerprint: fingerprint}, nil
}

// CheckReachable refuses a coordinator URL agents cannot use: not
// http(s)://HOST:PORT, or, for instances on the internet (remote), one on
// a private address without tunnels or without TLS. flag is --coord as
// typed.
func CheckReachable(ci Info, flag string, remote bool) error {
	u, err := url.Parse(ci.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usage.Errorf("--coord %q: want auto or the coordinator's http(s)://HOST:PORT", flag)
	}
	if !remote || ci.TunnelBase != 0 {
		return nil
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() == "localhost" || (ip != nil && (ip.IsLoopback() || ip.IsPrivate())) {
		return usage.Errorf("--coord %s: instances on vast.ai cannot reach this address; run `vastfleet coord --tunnel` here and pass --coord auto (agents reach it through SSH tunnels), or run `vastfleet coord --addr 0.0.0.0:8470 --tls` on a machine with a public address and pass --coord https://HOST:8470", ci.URL)
	}
	if u.Scheme != "https" {
		return usage.Errorf("--coord %s: agents send tokens and findings over the internet; use the coordinator's https:// address (vastfleet coord --tls)", ci.URL)
	}
	return nil
}

// Enlist readies the data dir's coordinator database for a fleet about to
// launch: its dead-man policy (orphanAfter <= 0: the default), so that
// `vastfleet reap` later reaps silent instances the same way, and its
// items, queued before renting so the first agent to boot finds them
// (idempotent: a relaunch adds only new items). It returns the fleet's
// agent token.
func Enlist(ctx context.Context, dir, fleet string, orphanAfter time.Duration, policy string, items []string) (string, error) {
	db, err := OpenDB(ctx, filepath.Join(dir, "coord.db"))
	if err != nil {
		return "", err
	}
	defer db.Close()
	token, _, err := db.FleetTokens(ctx, fleet)
	if err != nil {
		return "", err
	}
	if orphanAfter <= 0 {
		orphanAfter = wire.DefaultOrphanAft
	}
	if err := db.SetFleetPolicy(ctx, fleet, orphanAfter, policy); err != nil {
		return "", err
	}
	if len(items) > 0 {
		if err := db.AddItems(ctx, fleet, items); err != nil {
			return "", err
		}
	}
	return token, nil
}

// Joining is a fleet about to launch with the agent on its instances,
// reporting to the coordinator a launch's --coord names.
type Joining struct {
	Dir         string // the data dir
	Coord       string // --coord as typed: auto, or the coordinator's URL
	CoordSHA256 string // --coord-sha256: the URL's certificate pin
	Fleet       string
	// Remote: the instances are on the internet (vast.ai), so the
	// coordinator must be reachable from there (CheckReachable).
	Remote       bool
	OrphanAfter  time.Duration
	OrphanPolicy string
	Items        []string
}

// Join enlists the fleet with the coordinator (Resolve, CheckReachable,
// Enlist) and returns what its instances' onstart needs to install the
// agent and report: the coordinator's address and pin, the fleet's agent
// token, the agent binary's digest, the dead-man switch, and the tunnel
// port base. The caller adds the sessions, the teardown ladder and the
// market's time scale.
func Join(ctx context.Context, j Joining) (bootstrap.Agent, error) {
	ci, err := Resolve(j.Dir, j.Coord, j.CoordSHA256)
	if err != nil {
		return bootstrap.Agent{}, err
	}
	if err := CheckReachable(ci, j.Coord, j.Remote); err != nil {
		return bootstrap.Agent{}, err
	}
	token, err := Enlist(ctx, j.Dir, j.Fleet, j.OrphanAfter, j.OrphanPolicy, j.Items)
	if err != nil {
		return bootstrap.Agent{}, err
	}
	sum, err := AgentDigest(ctx, ci.URL, token, ci.Fingerprint)
	if err != nil {
		return bootstrap.Agent{}, err
	}
	return bootstrap.Agent{CoordURL: ci.URL, Fleet: j.Fleet, Token: token, BinarySHA256: sum, Fingerprint: ci.Fingerprint,
		OrphanAfter: j.OrphanAfter, OrphanPolicy: j.OrphanPolicy, TunnelPortBase: ci.TunnelBase}, nil
}

// FleetAgents reads the states of the fleet's agents from the
// coordinator j names, with the fleet's viewer token (AgentStates).
func FleetAgents(ctx context.Context, j Joining) (func(context.Context, string) (map[int64]wire.Node, error), error) {
	ci, err := Resolve(j.Dir, j.Coord, j.CoordSHA256)
	if err != nil {
		return nil, err
	}
	viewer, err := ViewerToken(ctx, j.Dir, j.Fleet)
	if err != nil {
		return nil, err
	}
	return AgentStates(ci.URL, viewer, ci.Fingerprint), nil
}

// ViewerToken is the fleet's viewer token in the data dir's coordinator
// database.
func ViewerToken(ctx context.Context, dir, fleet string) (string, error) {
	db, err := OpenDB(ctx, filepath.Join(dir, "coord.db"))
	if err != nil {
		return "", err
	}
	defer db.Close()
	_, viewer, err := db.FleetTokens(ctx, fleet)
	return viewer, err
}

// pinnedClient is an HTTP client that trusts only the certificate
// pinned by fingerprint, if any.
func pinnedClient(fingerprint string) *http.Client {
	client := &http.Client{Timeout: 10 * time.Second}
	if fingerprint != "" {
		client.Transport = &http.Transport{TLSClientConfig: certpin.TLSConfig(fingerprint)}
	}
	return client
}

// AgentStates reads the fleet's nodes (boot stage, probe) from the
// coordinator's live state at base, by instance id.
func AgentStates(base, viewerToken, fingerprint string) func(context.Context, string) (map[int64]wire.Node, error) {
	client := pinnedClient(fingerprint)
	return func(ctx context.Context, _ string) (map[int64]wire.Node, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+wire.PathState, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+viewerToken)
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return nil, fmt.Errorf("coordinator state: HTTP %d %s", resp.StatusCode, strings.TrimSpace(string(b)))
		}
		var snap wire.Snapshot
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&snap); err != nil {
			return nil, fmt.Errorf("coordinator state: %w", err)
		}
		out := map[int64]wire.Node{}
		for _, n := range snap.Nodes {
			if n.InstanceID != 0 {
				out[n.InstanceID] = n
			}
		}
		return out, nil
	}
}

// AgentDigest asks the coordinator at base for the sha256 of the agent it
// serves; it also proves the coordinator answers and knows the fleet's
// token.
func AgentDigest(ctx context.Context, base, token, fingerprint string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+wire.PathAgentSum, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := pinnedClient(fingerprint).Do(req)
	if err != nil {
		return "", fmt.Errorf("--coord %s: the coordinator does not answer (%w); is `vastfleet coord` running?", base, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("--coord %s: asking for the agent's digest: HTTP %d %s", base, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return strings.TrimSpace(string(b)), nil
}
