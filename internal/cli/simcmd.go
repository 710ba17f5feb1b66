package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/sim"
)

func newSimCmd(f *factory) *cobra.Command {
	cmd := &cobra.Command{Use: "sim", Short: "The built-in vast.ai-compatible simulated marketplace"}
	cmd.AddCommand(newSimServeCmd(f), newSimResetCmd(f))
	return cmd
}

type simServeOptions struct {
	Addr   string
	Seed   int64
	Offers int
	Speed  float64
	Faults string
	State  string
	APIKey string
}

func newSimServeCmd(f *factory) *cobra.Command {
	opts := &simServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the simulated marketplace over HTTP (the vast.ai API, on loopback)",
		Long: `Run the simulated marketplace as a standalone server speaking vast.ai's HTTP
API. Point vastfleet at it with --api-url http://ADDR (and --market sim), or the
official vastai CLI with VAST_URL=http://ADDR.`,
		Example: `  vastfleet sim serve --addr 127.0.0.1:8765 --seed 7 --faults none`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return simServeRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Addr, "addr", "127.0.0.1:8765", "listen address (loopback)")
	fl.Int64Var(&opts.Seed, "seed", 1, "market seed: the same seed gives the same offers")
	fl.IntVar(&opts.Offers, "offers", 0, "number of offers (0: the default population)")
	fl.Float64Var(&opts.Speed, "time-scale", 60, "simulated seconds per wall second")
	fl.StringVar(&opts.Faults, "faults", "realistic", "fault profile: none, realistic or harsh")
	fl.StringVar(&opts.State, "state", "", "directory to keep the market's state in across restarts (default: memory only)")
	fl.StringVar(&opts.APIKey, "api-key", simAPIKey, "the API key the simulator accepts")
	return cmd
}

func simServeRun(ctx context.Context, f *factory, opts *simServeOptions) error {
	if opts.Speed <= 0 {
		return usagef("--time-scale %v: must be positive", opts.Speed)
	}
	faults, err := sim.Profile(opts.Faults)
	if err != nil {
		return usagef("--faults: %v", err)
	}
	cfg := sim.Config{Seed: opts.Seed, Offers: opts.Offers, APIKey: opts.APIKey, Faults: faults, TimeScale: opts.Speed}
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
	fmt.Fprintf(f.io.ErrOut, "simulated marketplace on http://%s (seed %d, faults %s, %gx time, API key %q)\n",
		ln.Addr(), opts.Seed, opts.Faults, opts.Speed, opts.APIKey)
	if err := m.ServeListener(ctx, ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func newSimResetCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:   "reset",
		Short: "Start the in-process simulated market afresh (forgets its instances, ledger and clock)",
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := f.dataDir()
			if err != nil {
				return err
			}
			if err := sim.Reset(filepath.Join(dir, "sim")); err != nil {
				return err
			}
			fmt.Fprintln(f.io.ErrOut, "simulated market reset; the state store still remembers its instances: run `vastfleet reconcile` to mark them gone")
			return nil
		},
	}
}
