package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/sim"
)

func newSimCmd(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "sim", Short: "The built-in vast.ai-compatible simulated marketplace"}
	cmd.AddCommand(newSimServeCmd(f, nil), newSimResetCmd(f, nil), newSimDepthCmd(f, nil), newSimDaemonCmd(f, nil), newSimStopCmd(f, nil))
	return cmd
}

func newSimServeCmd(f *factory.Factory, runF func(context.Context, *sim.ServeOptions) error) *cobra.Command {
	opts := &sim.ServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the simulated marketplace over HTTP (the vast.ai API, on loopback)",
		Long: `Run the simulated marketplace as a standalone server speaking vast.ai's HTTP
API. Point vastfleet at it with --api-url http://ADDR (and --market sim), or the
official vastai CLI with VAST_URL=http://ADDR.`,
		Example: `  vastfleet sim serve --addr 127.0.0.1:8765 --seed 7 --faults none`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, f, opts, runF, simServeRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Addr, "addr", "127.0.0.1:8765", "listen address (loopback unless --public)")
	fl.BoolVar(&opts.Public, "public", false, "allow a non-loopback --addr (other machines can reach it); needs a non-default --api-key")
	fl.Int64Var(&opts.Seed, "seed", 1, "market seed: the same seed gives the same offers")
	fl.IntVar(&opts.Offers, "offers", 0, "number of machines, each listing one or more offers: about 1.26 offers per machine (0: the default population)")
	fl.Float64Var(&opts.Balance, "balance", sim.DefaultBalance, "the account's starting credit in dollars (a fleet of 1,000 at $0.60/hr each spends $1,000 in 100 market minutes)")
	fl.Float64Var(&opts.Speed, "time-scale", 60, "simulated seconds per wall second")
	fl.StringVar(&opts.Clock, "clock", "scaled", "market time: scaled (wall time × --time-scale) or manual (still until a client POSTs /sim/advance?d=10m from loopback, so its results never depend on this machine's load)")
	fl.StringVar(&opts.Faults, "faults", "realistic", "fault profile: none, realistic or harsh")
	fl.StringVar(&opts.State, "state", "", "directory to keep the market's state in across restarts (default: memory only)")
	fl.StringVar(&opts.APIKey, "api-key", sim.DefaultAPIKey, "the API key the simulator accepts (cannot be empty: auth is always on)")
	fl.Float64Var(&opts.Stuck, "stuck", -1, "share of instances stuck in loading forever (overrides the profile)")
	fl.Float64Var(&opts.BootFail, "boot-fail", -1, "share of instances that fail to boot")
	fl.Float64Var(&opts.Offline, "offline", -1, "share of instances whose host goes offline")
	fl.Float64Var(&opts.Slow, "slow", -1, "share of instances on slow hosts that pull and unpack the image 5-20x slower (past 10 minutes for a multi-GB image)")
	fl.Float64Var(&opts.Rate429, "rate-429", -1, "share of requests answered 429 at random, on top of the profile's per-key rate limit")
	fl.Float64Var(&opts.Rate5xx, "rate-5xx", -1, "share of requests answered 500/502")
	fl.Float64Var(&opts.LostCreate, "lost-create", -1, "share of creates applied whose response is lost")
	fl.BoolVar(&opts.EndpointLimits, "endpoint-limits", false, "limit each endpoint per key as vast does: about one call a market second on most, search ten a minute (429 'endpoint threshold=N')")
	fl.BoolVar(&opts.AuthAs404, "auth-as-404", false, "answer a wrong key with 404 auth_error (as seen for revoked keys) instead of 401")
	fl.Float64Var(&opts.SSHLate, "ssh-late", -1, "share of instances that refuse their SSH keys for 5-60 s after running")
	fl.Float64Var(&opts.SSHHang, "ssh-hang", -1, "share of instances whose SSH handshake hangs")
	fl.Float64Var(&opts.SSHDrop, "ssh-drop", -1, "share of instances whose SSH connections drop mid-session")
	fl.Float64Var(&opts.OnstartFail, "onstart-fail", -1, "share of instances whose onstart exits 1")
	fl.Float64Var(&opts.DarkHang, "dark-hang", -1, "share of hosts gone offline whose SSH port hangs rather than refuses")
	fl.Float64Var(&opts.Liars, "liars", -1, "share of machines whose operators lie with the agent's credential: wrong results, forged findings, results for items never leased, heartbeats as other nodes")
	fl.Float64Var(&opts.OddRows, "odd-rows", -1, "share of offer and instance rows sent in shapes vast has been seen to send: ports as a list, a price as a string, a version as a number, an unknown column, a null")
	fl.IntVar(&opts.Cap, "cap", 0, "answer every search with at most N offers, whatever limit it asks (as a server that cuts answers short); 0: no cap")
	fl.Float64Var(&opts.Spoof, "spoof", -1, "share of machines whose true cores, RAM or GPUs are below what they advertise (their processes get the true CPU share; nvidia-smi lists the true GPUs)")
	fl.BoolVar(&opts.Links, "links", false, "pace each machine's SSH traffic at its offer's inet_down (into the machine) and inet_up (out of it), so a sync or collect takes the time its links allow")
	fl.Float64Var(&opts.CapacityScale, "capacity-scale", 0, "run each machine's workload at its true cores over this scale: N simulated cores to one of this computer's (a CPU cgroup per machine; 0: every machine shares this computer's cores alike)")
	fl.BoolVar(&opts.NoHosts, "no-hosts", false, "instances are rows only: no directory, onstart or SSH behind them")
	limitFlags(fl, bounds{"offers", "0", "10000000"}, bounds{"balance", ">0", "1e12"}, bounds{"time-scale", ">0", "1000000"}, bounds{"cap", "0", "1000"}, bounds{"capacity-scale", "0", "1e9"})
	// -1 leaves the share to the profile.
	for _, share := range []string{"stuck", "boot-fail", "offline", "slow", "rate-429", "rate-5xx", "lost-create",
		"ssh-late", "ssh-hang", "ssh-drop", "onstart-fail", "dark-hang", "liars", "odd-rows", "spoof"} {
		limitFlags(fl, bounds{share, "-1", "1"})
	}
	return cmd
}

func simServeRun(ctx context.Context, f *factory.Factory, opts *sim.ServeOptions) error {
	return sim.ServeStandalone(ctx, opts, f.Log, f.IO.ErrOut)
}

// simResetOptions is what `sim reset` was asked: it takes no flags of its
// own (the data dir is the root's).
type simResetOptions struct{}

// newSimResetCmd hands its (empty) options to runF (tests) or simResetRun.
func newSimResetCmd(f *factory.Factory, runF func(context.Context, *simResetOptions) error) *cobra.Command {
	opts := &simResetOptions{}
	return &cobra.Command{
		Use:   "reset",
		Short: "Start this data dir's simulated market afresh (stops the local market first; forgets its instances, ledger and clock)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, f, opts, runF, simResetRun)
		},
	}
}

// simResetRun is `sim reset` once parsed.
func simResetRun(ctx context.Context, f *factory.Factory, _ *simResetOptions) error {
	return f.ResetLocalMarket(ctx)
}
