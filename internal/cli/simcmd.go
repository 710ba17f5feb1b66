package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/localmarket"
	"github.com/vastfleet/vastfleet/internal/sim"
)

func newSimCmd(f *factory) *cobra.Command {
	cmd := &cobra.Command{Use: "sim", Short: "The built-in vast.ai-compatible simulated marketplace"}
	cmd.AddCommand(newSimServeCmd(f, nil), newSimResetCmd(f, nil), newSimDepthCmd(f, nil), newSimDaemonCmd(f, nil), newSimStopCmd(f, nil))
	return cmd
}

type simServeOptions struct {
	Addr string
	// Clock is "scaled" (wall time × --time-scale) or "manual" (still
	// until POST /sim/advance?d=DURATION moves it).
	Clock  string
	Seed   int64
	Offers int
	// Balance is the account's starting credit in dollars (0: sim's
	// default, $1,000).
	Balance float64
	Speed   float64
	Faults  string
	State   string
	APIKey  string
	// Public allows a non-loopback --addr (with a non-default key).
	Public bool
	// Knobs override single shares of the fault profile; <0 means unset.
	Stuck, BootFail, Offline, Slow, Rate429, Rate5xx, LostCreate   float64
	SSHLate, SSHHang, SSHDrop, OnstartFail, DarkHang, Liars, Spoof float64
	OddRows                                                        float64
	// Cap answers every search with at most this many offers (0: no cap).
	Cap                       int
	AuthAs404, EndpointLimits bool
	// NoHosts serves rows only: no machine behind the instances.
	NoHosts bool
	// Links paces each machine's SSH traffic at its offer's bandwidth.
	Links bool
}

func newSimServeCmd(f *factory, runF func(context.Context, *simServeOptions) error) *cobra.Command {
	opts := &simServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the simulated marketplace over HTTP (the vast.ai API, on loopback)",
		Long: `Run the simulated marketplace as a standalone server speaking vast.ai's HTTP
API. Point vastfleet at it with --api-url http://ADDR (and --market sim), or the
official vastai CLI with VAST_URL=http://ADDR.`,
		Example: `  vastfleet sim serve --addr 127.0.0.1:8765 --seed 7 --faults none`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return simServeRun(cmd.Context(), f, opts)
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
	fl.StringVar(&opts.APIKey, "api-key", simAPIKey, "the API key the simulator accepts (cannot be empty: auth is always on)")
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
	fl.BoolVar(&opts.NoHosts, "no-hosts", false, "instances are rows only: no directory, onstart or SSH behind them")
	limitFlags(fl, bounds{"offers", "0", "10000000"}, bounds{"balance", ">0", "1e12"}, bounds{"time-scale", ">0", "1000000"}, bounds{"cap", "0", "1000"})
	// -1 leaves the share to the profile.
	for _, share := range []string{"stuck", "boot-fail", "offline", "slow", "rate-429", "rate-5xx", "lost-create",
		"ssh-late", "ssh-hang", "ssh-drop", "onstart-fail", "dark-hang", "liars", "odd-rows", "spoof"} {
		limitFlags(fl, bounds{share, "-1", "1"})
	}
	return cmd
}

// checkServeExposure refuses what would open the simulator to strangers:
// no key (auth cannot be turned off), or an address other machines reach
// without --public and a key of the user's own (the default is published).
func checkServeExposure(opts *simServeOptions) error {
	if strings.TrimSpace(opts.APIKey) == "" {
		return usagef("--api-key '': the simulator always checks a key; give one, or leave the flag out for the default")
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return usagef("--addr %q: want HOST:PORT (%v)", opts.Addr, err)
	}
	if loopbackHost(host) {
		return nil
	}
	if !opts.Public {
		return usagef("--addr %s listens beyond this machine: pass --public if other machines should reach it (and a key of your own with --api-key)", opts.Addr)
	}
	if opts.APIKey == simAPIKey {
		return usagef("--public with the default API key: the default is published; choose your own with --api-key")
	}
	return nil
}

// loopbackHost reports whether host names this machine only: "localhost"
// or a loopback IP. An empty host (":8765") is every interface.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// keyNote says which key the simulator accepts without printing it: a
// banner lands in terminals, logs and screen shares.
func keyNote(key string) string {
	if key == simAPIKey {
		return "the built-in default key"
	}
	return fmt.Sprintf("the key given with --api-key (%d characters)", len(key))
}

func simServeRun(ctx context.Context, f *factory, opts *simServeOptions) error {
	if err := checkServeExposure(opts); err != nil {
		return err
	}
	if opts.Speed <= 0 {
		return usagef("--time-scale %v: must be positive", opts.Speed)
	}
	faults, err := sim.Profile(opts.Faults)
	if err != nil {
		return usagef("--faults: %v", err)
	}
	for _, k := range []struct {
		name string
		v    float64
		dst  *float64
	}{
		{"--stuck", opts.Stuck, &faults.StuckLoading}, {"--boot-fail", opts.BootFail, &faults.BootFail},
		{"--offline", opts.Offline, &faults.HostOffline}, {"--slow", opts.Slow, &faults.SlowBoot},
		{"--rate-429", opts.Rate429, &faults.Rate429}, {"--rate-5xx", opts.Rate5xx, &faults.Rate5xx},
		{"--lost-create", opts.LostCreate, &faults.LostCreate},
		{"--ssh-late", opts.SSHLate, &faults.SSHLate}, {"--ssh-hang", opts.SSHHang, &faults.SSHHang},
		{"--ssh-drop", opts.SSHDrop, &faults.SSHDrop}, {"--onstart-fail", opts.OnstartFail, &faults.OnstartFail},
		{"--dark-hang", opts.DarkHang, &faults.DarkHang}, {"--spoof", opts.Spoof, &faults.Spoof},
		{"--liars", opts.Liars, &faults.Liars},
		{"--odd-rows", opts.OddRows, &faults.OddRows},
	} {
		if k.v == -1 {
			continue
		}
		if k.v < 0 || k.v > 1 {
			return usagef("%s %v: a share is between 0 and 1", k.name, k.v)
		}
		*k.dst = k.v
	}
	faults.AuthAs404 = faults.AuthAs404 || opts.AuthAs404
	faults.EndpointLimits = faults.EndpointLimits || opts.EndpointLimits
	cfg := sim.Config{Seed: opts.Seed, Offers: opts.Offers, Balance: opts.Balance, APIKey: opts.APIKey, Faults: faults, TimeScale: opts.Speed, Log: f.log, AnswerCap: opts.Cap, Links: opts.Links}
	pace := fmt.Sprintf("%gx time", opts.Speed)
	switch opts.Clock {
	case "scaled":
	case "manual":
		if opts.State != "" {
			return usagef("--clock manual with --state: a kept market's time runs on from where it was; leave out --state, or use --clock scaled")
		}
		cfg.Clock = clock.NewManual(time.Now().UTC().Truncate(time.Second))
		pace = "manual time: POST /sim/advance?d=DURATION moves it"
	default:
		return usagef("--clock %q: use scaled or manual", opts.Clock)
	}
	if !opts.NoHosts {
		// Instance directories live with the state, or for a memory-only
		// market in a directory removed on exit.
		if opts.State != "" {
			cfg.HostDir = sim.HostsDir(opts.State)
		} else {
			tmp, err := os.MkdirTemp("", "vastfleet-sim-hosts-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			cfg.HostDir = tmp
		}
	}
	var m *sim.Market
	if opts.State != "" {
		m, err = sim.Open(opts.State, cfg)
	} else {
		m, err = sim.New(cfg)
	}
	if err != nil {
		return err
	}
	defer m.Close()
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", opts.Addr, err)
	}
	fmt.Fprintf(f.io.ErrOut, "simulated marketplace on http://%s (seed %d, faults %s, %s; it accepts %s)\n",
		ln.Addr(), opts.Seed, opts.Faults, pace, keyNote(opts.APIKey))
	if cfg.HostDir != "" {
		fmt.Fprintf(f.io.ErrOut, "instances run in %s and answer SSH on 127.0.0.1\n", cfg.HostDir)
	}
	if err := m.ServeListener(ctx, ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// simResetOptions is what `sim reset` was asked: it takes no flags of its
// own (the data dir is the root's).
type simResetOptions struct{}

// newSimResetCmd hands its (empty) options to runF (tests) or simResetRun.
func newSimResetCmd(f *factory, runF func(context.Context, *simResetOptions) error) *cobra.Command {
	opts := &simResetOptions{}
	return &cobra.Command{
		Use:   "reset",
		Short: "Start the in-process simulated market afresh (forgets its instances, ledger and clock)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return simResetRun(cmd.Context(), f, opts)
		},
	}
}

// simResetRun is `sim reset` once parsed.
func simResetRun(ctx context.Context, f *factory, _ *simResetOptions) error {
	dir, err := f.dataDir()
	if err != nil {
		return err
	}
	// The local market holds the state open: it saves and ends first.
	if _, err := localmarket.Stop(ctx, filepath.Join(dir, "sim")); err != nil {
		return err
	}
	if err := sim.Reset(filepath.Join(dir, "sim")); err != nil {
		return err
	}
	fmt.Fprintln(f.io.ErrOut, "simulated market reset; the state store still remembers its instances: run `vastfleet reconcile` to mark them gone")
	return nil
}
