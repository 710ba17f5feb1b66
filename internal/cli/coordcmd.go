package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/bootstrap"
	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/wire"
)

type coordOptions struct {
	factory.CoordOptions
	Fleets []string
}

func newCoordCmd(f *factory.Factory, runF func(context.Context, *coordOptions) error) *cobra.Command {
	opts := &coordOptions{}
	cmd := &cobra.Command{
		Use:   "coord [--addr 127.0.0.1:8470] [--tls] [--fleet F...]",
		Short: "Run the coordinator: agents report to it, the dashboard shows the fleet live",
		Long: `Run the coordinator until Ctrl+C. Every agent (started on each instance by
launch --coord) sends it heartbeats, custom metrics and findings; findings are
committed to DATA_DIR/coord.db before they are acknowledged, so none is lost
or stored twice. It serves a live dashboard per fleet (the link with the
fleet's viewer token is printed) and Prometheus /metrics.

Where to run it, and how agents reach it:
  - On this machine, reached through reverse tunnels (--tunnel; the default
    with --market vast): the coordinator stays on 127.0.0.1, and for every
    running instance vastfleet keeps an SSH connection that listens on the
    node's 127.0.0.1:PORT and carries each connection home. Nothing needs a
    public address or an open port, and SSH encrypts the traffic. PORT is
    --tunnel-port-base plus the instance id modulo 10000 (so nodes sharing a
    loopback, as simulated ones do, never collide). The price: this machine
    must stay up and online; when it sleeps, agents lose the coordinator and
    their dead-man switch stops (or destroys) the instances after
    --orphan-after. Pick this for runs you watch, up to a few hundred nodes.
    Start the coordinator first, then launch --coord auto.
  - On a machine with a public address (a small VPS): --addr 0.0.0.0:8470
    --tls, and launch with --coord https://HOST:8470. Agents pin the
    certificate's fingerprint. Pick this for long or unattended runs: the
    fleet reports while your laptop is closed, and no SSH connection per
    node is held.
  - On this machine without tunnels (the default with the simulated
    marketplace, whose instances share this machine's loopback).

With the simulated marketplace the coordinator also keeps the simulated
instances' machines running (their agents and sessions) while it runs, and
other vastfleet commands reach the market through it.

While it runs, agents whose coordinator falls silent for --orphan-after stop
(or destroy) their own instance: the dead-man switch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.TunnelSet = cmd.Flags().Changed("tunnel")
			return run(cmd, f, opts, runF, coordRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Addr, "addr", "127.0.0.1:8470", "address to listen on")
	fl.BoolVar(&opts.TLS, "tls", false, "serve HTTPS with a self-signed certificate kept in the data dir (agents pin its fingerprint)")
	fl.StringVar(&opts.AgentBin, "agent-bin", "", "agent binary to serve to instances (default: vastfleet-agent beside this binary, else built from the module source, else this binary)")
	fl.DurationVar(&opts.OrphanAfter, "orphan-after", wire.DefaultOrphanAft, "agents stop their instance after this long without the coordinator")
	fl.StringVar(&opts.OrphanPolicy, "orphan-policy", wire.PolicyStop, "what the dead-man switch does: stop or destroy")
	fl.DurationVar(&opts.Interval, "heartbeat", 10*time.Second, "heartbeat interval told to agents (marketplace time)")
	fl.StringArrayVar(&opts.Fleets, "fleet", nil, "print the dashboard link of this fleet (repeatable; default: every fleet in the store)")
	fl.StringVar(&opts.DepthQuery, "depth-query", "rentable=True", "the offers the dashboard's market-depth plot ranks by vCPU per $/hr (vastai query language; empty: no plot)")
	fl.BoolVar(&opts.Tunnel, "tunnel", false, "keep a reverse SSH tunnel to every running instance, so agents reach this coordinator from behind NAT (default with --market vast and a loopback --addr)")
	fl.IntVar(&opts.TunnelBase, "tunnel-port-base", bootstrap.DefaultTunnelPortBase, "with --tunnel: agents dial 127.0.0.1:(this + instance id % 10000) on their node")
	limitFlags(fl, bounds{"orphan-after", "1m", "8760h"}, bounds{"heartbeat", "1s", "1h"}, bounds{"tunnel-port-base", "1024", "55535"})
	return withNeeds(f, cmd, reachesNodes) // the simulated instances run while the coordinator runs
}

func coordRun(ctx context.Context, f *factory.Factory, opts *coordOptions) error {
	c, err := f.StartCoord(ctx, &opts.CoordOptions)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(f.IO.ErrOut, "coordinator at %s (dead-man switch: agents %s their instance after %s without it)\n", c.URL, opts.OrphanPolicy, opts.OrphanAfter)
	if opts.Tunnel {
		f.KeepTunnels(ctx, c, opts.TunnelBase, opts.Fleets)
	}
	if err := printDashboards(ctx, f, c, opts.Fleets); err != nil {
		return err
	}
	// Instances that cannot run their own switch (stopped, outbid, a
	// wedged agent) are reaped from here.
	rep := fleet.Reporter{Out: f.IO.Out, ErrOut: f.IO.ErrOut}
	go f.ReapWhileCoordinating(ctx, fleet.Pass{Heartbeats: c.DB, Switch: fleet.Switch{After: opts.OrphanAfter, Policy: opts.OrphanPolicy},
		OnLaddered: rep.Laddered, OnReaped: rep.Reaped})
	// Outbids and resumes are dated within a few seconds while it runs.
	go f.WatchBidsWhileCoordinating(ctx)
	fmt.Fprintln(f.IO.ErrOut, "Ctrl+C stops it.")
	select {
	case <-ctx.Done():
	case err := <-c.Served:
		return err
	}
	return nil
}

// printDashboards prints each fleet's dashboard link.
func printDashboards(ctx context.Context, f *factory.Factory, c *coord.Running, fleets []string) error {
	if len(fleets) == 0 {
		st, err := f.ReadStore(ctx)
		if err != nil {
			return err
		}
		if fleets, err = st.FleetNames(ctx); err != nil {
			return err
		}
	}
	if len(fleets) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "no fleets yet: `vastfleet launch --coord auto ...` starts one that reports here; `vastfleet coord --fleet NAME` prints its link")
	}
	links, err := c.DashboardLinks(ctx, fleets)
	for _, l := range links {
		fmt.Fprintf(f.IO.Out, "%s\t%s\n", l[0], l[1])
	}
	return err
}
