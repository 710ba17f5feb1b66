package cli

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
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/itemspec"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// withAgent makes every instance of the launch run the agent: the onstart
// installs it from the coordinator, and the sessions run under it instead
// of tmux, reporting to the coordinator.
func (f *factory) withAgent(ctx context.Context, spec *launch.Spec, o *launchOptions) error {
	if o.OrphanPolicy != wire.PolicyStop && o.OrphanPolicy != wire.PolicyDestroy {
		return usagef("--orphan-policy %q: use stop or destroy", o.OrphanPolicy)
	}
	dir, err := f.dataDir()
	if err != nil {
		return err
	}
	target, fingerprint, tunnelBase := o.Coord, o.CoordSHA256, 0
	if target == "auto" {
		ci, err := coord.ReadInfo(dir)
		if err != nil {
			return err
		}
		target, fingerprint, tunnelBase = ci.URL, ci.Fingerprint, ci.TunnelBase
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--coord %q: want auto or the coordinator's http(s)://HOST:PORT", o.Coord)
	}
	if f.opts.Market == "vast" && tunnelBase == 0 {
		if ip := net.ParseIP(u.Hostname()); u.Hostname() == "localhost" || (ip != nil && (ip.IsLoopback() || ip.IsPrivate())) {
			return usagef("--coord %s: instances on vast.ai cannot reach this address; run `vastfleet coord --tunnel` here and pass --coord auto (agents reach it through SSH tunnels), or run `vastfleet coord --addr 0.0.0.0:8470 --tls` on a machine with a public address and pass --coord https://HOST:8470", target)
		}
		if u.Scheme != "https" {
			return usagef("--coord %s: agents send tokens and findings over the internet; use the coordinator's https:// address (vastfleet coord --tls)", target)
		}
	}
	var sessions []wire.Session
	workers := 0
	for _, s := range spec.Sessions {
		ws := wire.Session{Name: s.Name, Command: s.Command, Restart: s.Restart, After: s.After}
		if ws.IsItemWorker() {
			workers++
		}
		sessions = append(sessions, ws)
	}
	var items []string
	if o.Items != "" {
		if workers == 0 {
			return usagef("--items: no --session names %s in its command, so nothing would run the items", wire.ItemPlaceholder)
		}
		if items, err = itemspec.ParseItems(o.Items); err != nil {
			return usageError{err}
		}
	} else if workers > 0 {
		return usagef("a --session names %s: give the items with --items", wire.ItemPlaceholder)
	}
	db, err := coord.OpenDB(ctx, filepath.Join(dir, "coord.db"))
	if err != nil {
		return err
	}
	token, _, err := db.FleetTokens(ctx, spec.Fleet)
	if err == nil {
		// `vastfleet reap` later reaps silent instances the same way.
		after := o.OrphanAfter
		if after <= 0 {
			after = wire.DefaultOrphanAft
		}
		err = db.SetFleetPolicy(ctx, spec.Fleet, after, o.OrphanPolicy)
	}
	if err == nil && len(items) > 0 {
		// Before renting: the first agent to boot finds them queued.
		// Idempotent, so a relaunch of the fleet adds only new items.
		err = db.AddItems(ctx, spec.Fleet, items)
	}
	db.Close()
	if err != nil {
		return err
	}
	sum, err := agentDigest(ctx, target, token, fingerprint)
	if err != nil {
		return err
	}
	scale := 0.0
	if f.opts.Market == "sim" {
		// The agents' timers run in the market's time: ask the market
		// (usually the one the coordinator holds) for its scale.
		if _, err := f.Provider(ctx); err != nil {
			return err
		}
		scale = f.simScale()
	}
	onstart, err := bootstrap.AgentOnstart(o.Onstart, bootstrap.Agent{
		CoordURL: target, Fleet: spec.Fleet, Token: token, BinarySHA256: sum, Fingerprint: fingerprint,
		Sessions: sessions, OrphanAfter: o.OrphanAfter, OrphanPolicy: o.OrphanPolicy, MaxLifetime: o.Ladder.MaxLifetime,
		IdleAfter: o.Ladder.IdleAfter, IdleBelow: o.Ladder.IdleBelow, TimeScale: scale,
		TunnelPortBase: tunnelBase,
	})
	if err != nil {
		return usageError{err}
	}
	spec.Create.Onstart = onstart
	spec.Sessions = nil // the agent runs them
	onShort, err := launch.ParseOnShort(o.OnShortHardware)
	if err != nil {
		return usageError{err}
	}
	spec.Hardware = &launch.HardwarePolicy{OnShort: onShort}
	return nil
}

// launchChecks are the launch's gates: the SSH handshake (--ready-check)
// and, with --coord, the boot probes the coordinator holds.
func (f *factory) launchChecks(ctx context.Context, o *launchOptions, fleetName string) (launch.Checks, error) {
	var c launch.Checks
	if f.opts.Market == "sim" {
		// The gates wait in market time, but a handshake, an agent's
		// download and its probe take wall time: on a fast simulated
		// clock they get at least a wall minute and three.
		scale := f.simScale()
		c.UsableFor = max(launch.DefaultUsableFor, time.Duration(scale*float64(time.Minute)))
		c.ProbeWait = max(launch.DefaultProbeWait, time.Duration(scale*float64(3*time.Minute)))
		// The simulated machines' agents run in wall time: a market
		// that moves only while vastfleet waits would otherwise pass
		// its deadline while they boot. Half a minute of wall time is
		// what ten agents on two busy cores took to download, probe and
		// report, with room to spare. A market on a scaled wall clock
		// (`sim serve`, another process's) moves anyway: waiting there
		// only blinds the launch, so it looks once a tick.
		if f.virtual != nil {
			c.AgentWait = 30 * time.Second
		}
	}
	switch o.ReadyCheck {
	case "ssh":
		c.Usable = sshUsable
	case "", "auto":
		// The simulator's instances answer SSH only with machines behind
		// them (--sim-hosts in process); agents need them, so --coord
		// implies them. Against a `sim serve` elsewhere, pass ssh.
		if f.opts.Market != "sim" || f.simHosts || o.Coord != "" {
			c.Usable = sshUsable
		}
	}
	if o.Coord == "" {
		return c, nil
	}
	dir, err := f.dataDir()
	if err != nil {
		return c, err
	}
	target, fingerprint := o.Coord, o.CoordSHA256
	if target == "auto" {
		ci, err := coord.ReadInfo(dir)
		if err != nil {
			return c, err
		}
		target, fingerprint = ci.URL, ci.Fingerprint
	}
	db, err := coord.OpenDB(ctx, filepath.Join(dir, "coord.db"))
	if err != nil {
		return c, err
	}
	_, viewer, err := db.FleetTokens(ctx, fleetName)
	db.Close()
	if err != nil {
		return c, err
	}
	c.Agents = coordAgents(target, viewer, fingerprint)
	return c, nil
}

func sshUsable(ctx context.Context, host string, port int) error {
	return remote.Handshake(ctx, host, port, launch.DefaultUsableTimeout)
}

// coordAgents reads the fleet's nodes (boot stage, probe) from the
// coordinator's live state, by instance id.
func coordAgents(base, viewerToken, fingerprint string) func(context.Context, string) (map[int64]wire.Node, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	if fingerprint != "" {
		client.Transport = &http.Transport{TLSClientConfig: certpin.TLSConfig(fingerprint)}
	}
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

// agentDigest asks the coordinator for the sha256 of the agent it serves;
// it also proves the coordinator answers and knows the fleet's token.
func agentDigest(ctx context.Context, base, token, fingerprint string) (string, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	if fingerprint != "" {
		client.Transport = &http.Transport{TLSClientConfig: certpin.TLSConfig(fingerprint)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+wire.PathAgentSum, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
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
